"""Kafka's leader epoch rules (Partition.checkCurrentLeaderEpoch, LeaderEpochFileCache.endOffsetFor)
as kcoord applies them: the current-epoch check, and where a requested epoch ended."""

from __future__ import annotations

import pytest

from kcoord.cluster.leader_epochs import NO_EPOCH, EpochEnd, current_epoch_error, end_offset_for
from kcoord.protocol.errors import ErrorCode
from kcoord.storage.postgres.ownership import EpochStart


@pytest.mark.parametrize(
    ("current", "leader", "error"),
    [
        (NO_EPOCH, 0, ErrorCode.none),
        (NO_EPOCH, 9, ErrorCode.none),
        (4, 4, ErrorCode.none),
        (3, 4, ErrorCode.fenced_leader_epoch),
        (-2, 0, ErrorCode.fenced_leader_epoch),
        (5, 4, ErrorCode.unknown_leader_epoch),
        (0, NO_EPOCH, ErrorCode.unknown_leader_epoch),
    ],
)
def test_current_leader_epoch_check(current: int, leader: int, error: ErrorCode) -> None:
    """-1 is never checked; an older epoch is fenced (stale metadata), a newer one unknown (stale leader)."""
    assert current_epoch_error(current, leader) == error


def test_the_leaders_own_epoch_ends_at_the_log_end() -> None:
    """Asked for its current epoch, the leader answers it with the log end offset."""
    assert end_offset_for(3, 3, 120, EpochStart(3, 80), None) == EpochEnd(3, 120)
    assert end_offset_for(0, 0, 7, None, None) == EpochEnd(0, 7)


def test_an_older_epoch_ends_where_the_next_recorded_one_starts() -> None:
    """Between two recorded epochs: the nearest one at or below, ending where the next one starts."""
    assert end_offset_for(2, 5, 500, EpochStart(2, 100), EpochStart(4, 300)) == EpochEnd(2, 300)
    assert end_offset_for(3, 5, 500, EpochStart(2, 100), EpochStart(4, 300)) == EpochEnd(2, 300)


def test_an_epoch_older_than_every_record_ends_where_the_first_starts() -> None:
    """Below the first recorded epoch: the requested epoch, ending where the first recorded starts."""
    assert end_offset_for(1, 5, 500, None, EpochStart(3, 40)) == EpochEnd(1, 40)


def test_unrecorded_later_epochs_end_no_later_than_the_log_end() -> None:
    """No recorded epoch after the requested one (claims made before epochs were recorded): the
    shared log never diverges, so it ended at most at the log end, never a false truncation."""
    assert end_offset_for(2, 5, 500, EpochStart(2, 100), None) == EpochEnd(2, 500)
    assert end_offset_for(2, 5, 500, None, None) == EpochEnd(2, 500)


@pytest.mark.parametrize("requested", [NO_EPOCH, -7, 6, 100])
def test_no_epoch_or_one_newer_than_the_leaders_is_undefined(requested: int) -> None:
    """-1, or an epoch the leader has not reached: leader epoch -1 and end offset -1, as Kafka."""
    assert end_offset_for(requested, 5, 500, None, None) == EpochEnd(-1, -1)
