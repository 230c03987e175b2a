"""When a committed offset expires (``offsets.retention.minutes``).

Kafka ages offsets from one of two instants, chosen per group
(``ClassicGroup.offsetExpirationCondition``, ``OffsetExpirationConditionImpl``):

* a *simple* group (offsets committed without group membership, no protocol type) ages each
  offset from its own commit;
* a group with a protocol type that is Empty ages all its offsets from the moment it became
  Empty, so a consumer that stops for a weekend does not lose its place on Monday morning;
* a Stable group using the ``consumer`` protocol ages, from each commit, only the offsets of
  topics none of its members subscribes to any more;
* any other group (rebalancing, or a protocol whose subscriptions the coordinator cannot read)
  keeps its offsets.

Offsets of a topic the group is subscribed to never expire. A record written with an explicit
``expire_timestamp`` (OffsetCommit v2-v4 ``retention_time_ms``, value version 1) expires at that
instant instead, but still only under the group conditions above.

Everything here is a pure function of plain values so the rule can be tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_OFFSETS_RETENTION_MS = 10080 * 60 * 1000
"""``offsets.retention.minutes`` default (7 days), in milliseconds."""

NO_EXPIRE_TIMESTAMP = -1
"""``expire_timestamp`` of a record that carries none (every record but value version 1)."""

CONSUMER_PROTOCOL_TYPE = "consumer"
EMPTY_STATE = "Empty"
STABLE_STATE = "Stable"
DEAD_STATE = "Dead"


@dataclass(frozen=True, slots=True)
class ExpiryRule:
    """How one group's offsets age.

    ``since_ms`` is the group-wide instant retention counts from; None means each offset
    counts from its own commit timestamp.
    """

    since_ms: int | None


def group_expiry_rule(
    state: str | None,
    protocol_type: str | None,
    simple_or_missing: bool,
    empty_since_ms: int | None,
) -> ExpiryRule | None:
    """The rule for one group, or None when none of its offsets may expire now."""
    if state == DEAD_STATE:
        return None
    if simple_or_missing:
        return ExpiryRule(since_ms=None)
    if state == EMPTY_STATE:
        # A group loaded from an old GroupMetadata value has no state timestamp; Kafka then
        # falls back to each commit's timestamp.
        return ExpiryRule(since_ms=empty_since_ms)
    if state == STABLE_STATE and protocol_type == CONSUMER_PROTOCOL_TYPE:
        return ExpiryRule(since_ms=None)
    return None


def is_offset_expired(
    rule: ExpiryRule,
    commit_timestamp_ms: int,
    expire_timestamp_ms: int,
    now_ms: int,
    retention_ms: int,
) -> bool:
    """Whether one offset of a group governed by ``rule`` has outlived its retention."""
    if expire_timestamp_ms != NO_EXPIRE_TIMESTAMP:
        return now_ms >= expire_timestamp_ms
    since_ms = commit_timestamp_ms if rule.since_ms is None else rule.since_ms
    return now_ms - since_ms >= retention_ms
