"""Acceptance (issue 4) item 4: a consumed topic that grows is consumed in full within two heartbeats.

Clients keep their default metadata.max.age.ms (5 minutes), so without help from the coordinator
they would notice the new partitions only minutes later. kcoord rebalances the group at once
(trigger ``partitions_added``) and answers each connection's next Fetch of the topic with
NOT_LEADER_OR_FOLLOWER once, so the clients refresh their metadata before the leader assigns.
"""

from __future__ import annotations

import time

import pytest

from tests.failover.conftest import MakeGroup
from tests.support.failover_clients import CLIENT_HEARTBEAT_MS, create_partitions
from tests.support.group_clients import ClientKind, append, create_and_fill, wait_until
from tests.support.kafka_python_stall import form_default_timing
from tests.support.server import KcoordProcess

pytestmark = pytest.mark.clients

KINDS = [ClientKind("kafka-python", "kafka-python"), ClientKind("confluent", "confluent")]
BEFORE, AFTER = 2, 4
PER_PARTITION = 20
DEADLINE_S = 2 * CLIENT_HEARTBEAT_MS / 1000


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
# After the growth kcoord answers the members' next Fetch with NOT_LEADER_OR_FOLLOWER once, as a hint to
# refresh their metadata (apis/broker/fetch.py); kafka-python reports it, librdkafka does not.
@pytest.mark.client_errors_allow("NOT_LEADER_OR_FOLLOWER")
def test_new_partitions_are_assigned_and_consumed_within_two_heartbeats(
    kcoord: KcoordProcess, make_group: MakeGroup, kind: ClientKind
) -> None:
    """After CreatePartitions 2 -> 4, default-configured consumers own and drain the new partitions in 6 s."""
    group = make_group(kcoord, BEFORE)
    expected = create_and_fill(kcoord, group.topic, BEFORE, PER_PARTITION)
    group.start_many([kind, kind])
    form_default_timing(group)
    group.wait_consumed(expected)

    assert create_partitions(kcoord, group.topic, AFTER) == 0
    grown_at = time.monotonic()
    new_records = append(kcoord, group.topic, range(BEFORE, AFTER), PER_PARTITION)

    wait_until(
        lambda: group.owned() == set(range(AFTER)), DEADLINE_S + 10, "the new partitions to be assigned"
    )
    assigned_at = group.all_owned_at(range(BEFORE, AFTER), since=grown_at)
    group.wait_consumed(expected | new_records, timeout=DEADLINE_S + 10)
    consumed_at = max(
        float(e["at"])
        for d in group.drivers
        for e in d.of_kind("consumed")
        if any((p, o) in new_records for p, o in e["records"])
    )
    assign_s, consume_s = assigned_at - grown_at, consumed_at - grown_at
    print(f"{kind.name}: new partitions assigned after {assign_s:.2f}s, consumed after {consume_s:.2f}s")
    assert max(assign_s, consume_s) < DEADLINE_S, (
        f"assigned after {assign_s:.2f}s, consumed after {consume_s:.2f}s (limit {DEADLINE_S}s)\n"
        + group.diagnose()
    )
    triggers = [e["trigger"] for e in group.rebalances()]
    assert triggers[-1] == "partitions_added", triggers
    group.partitions = AFTER
    group.wait_balanced(timeout=5.0)
