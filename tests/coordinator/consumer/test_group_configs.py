"""Per-group config overrides: validation of alterations, and the manager applying them per group."""

from __future__ import annotations

import pytest
from tests.coordinator.consumer.consumer_harness import GROUP, SESSION_MS, Harness

from kcoord.coordinator.consumer.group_configs import (
    HEARTBEAT_INTERVAL,
    SESSION_TIMEOUT,
    GroupConfigError,
    GroupConfigOverrides,
    altered,
)

DEFAULTS = {SESSION_TIMEOUT: 45_000, HEARTBEAT_INTERVAL: 5_000}
SET, DELETE = 0, 1


def test_set_and_delete_change_only_the_named_configs() -> None:
    values = altered({}, [(SESSION_TIMEOUT, SET, "9000"), (HEARTBEAT_INTERVAL, SET, "1500")], DEFAULTS)
    assert values == {SESSION_TIMEOUT: 9000, HEARTBEAT_INTERVAL: 1500}
    assert altered(values, [(SESSION_TIMEOUT, DELETE, None)], DEFAULTS) == {HEARTBEAT_INTERVAL: 1500}


@pytest.mark.parametrize(
    ("operations", "unknown"),
    [
        ([("consumer.unknown.ms", SET, "1")], True),
        ([(SESSION_TIMEOUT, SET, "soon")], False),
        ([(SESSION_TIMEOUT, SET, "0")], False),
        ([(HEARTBEAT_INTERVAL, SET, "-5")], False),
        ([(HEARTBEAT_INTERVAL, 2, "5")], False),
        ([(HEARTBEAT_INTERVAL, SET, "45000")], False),
        ([(SESSION_TIMEOUT, SET, "4000")], False),
    ],
    ids=[
        "unknown-name",
        "not-a-number",
        "zero",
        "negative",
        "append",
        "heartbeat=session",
        "session<default-hb",
    ],
)
def test_invalid_alterations_are_refused(
    operations: list[tuple[str, int, str | None]], unknown: bool
) -> None:
    with pytest.raises(GroupConfigError) as raised:
        altered({}, operations, DEFAULTS)
    assert raised.value.unknown is unknown


def test_session_check_uses_the_effective_heartbeat_interval() -> None:
    """A lower session timeout is fine once the group's own heartbeat interval is below it."""
    current = {HEARTBEAT_INTERVAL: 1_000}
    assert altered(current, [(SESSION_TIMEOUT, SET, "4000")], DEFAULTS) == {
        HEARTBEAT_INTERVAL: 1_000,
        SESSION_TIMEOUT: 4_000,
    }


def test_manager_applies_the_group_overrides_to_heartbeats_and_sessions() -> None:
    overrides = GroupConfigOverrides()
    harness = Harness(overrides=overrides)
    joined = harness.beat("m1", 0, topics=("orders",))
    assert joined.heartbeat_interval_ms == 500
    overrides.put(GROUP, {HEARTBEAT_INTERVAL: 2_000, SESSION_TIMEOUT: 9_000})
    again = harness.beat("m1", joined.member_epoch)
    assert again.heartbeat_interval_ms == 2_000
    harness.advance(8_999)
    assert "m1" in harness.group.members
    harness.advance(2)
    assert harness.manager.groups.get(GROUP) is None or "m1" not in harness.group.members


def test_other_groups_keep_the_defaults() -> None:
    overrides = GroupConfigOverrides()
    overrides.put("another-group", {HEARTBEAT_INTERVAL: 2_000, SESSION_TIMEOUT: 9_000})
    harness = Harness(overrides=overrides)
    joined = harness.beat("m1", 0, topics=("orders",))
    assert joined.heartbeat_interval_ms == 500
    harness.advance(SESSION_MS - 1)
    assert "m1" in harness.group.members
