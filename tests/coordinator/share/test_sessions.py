"""Share sessions: ShareFetch/ShareAcknowledge session epochs, partitions added and forgotten, limits."""

from __future__ import annotations

import uuid

import pytest

from kcoord.coordinator.share.sessions import ShareSessions
from kcoord.protocol.errors import ErrorCode, KafkaError

T = uuid.UUID(int=3)


def code_of(call: object, *args: object) -> ErrorCode:
    with pytest.raises(KafkaError) as refused:
        call(*args)  # type: ignore[operator]
    return refused.value.code


def test_epoch_zero_opens_and_each_request_moves_the_epoch() -> None:
    """A fetch with epoch 0 opens a session expecting 1; each accepted request expects one more."""
    sessions = ShareSessions()
    opened = sessions.fetch("g", "m", 0, [(T, 0)])
    assert opened is not None and (opened.epoch, opened.partitions) == (1, {(T, 0)})
    following = sessions.fetch("g", "m", 1, [(T, 1)], [(T, 0)])
    assert following is opened and (opened.epoch, opened.partitions) == (2, {(T, 1)})
    assert sessions.acknowledge("g", "m", 2) is opened and opened.epoch == 3


def test_wrong_or_missing_sessions_get_kafkas_errors() -> None:
    """A stale epoch: INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND; ShareAcknowledge
    cannot open a session."""
    sessions = ShareSessions()
    assert code_of(sessions.fetch, "g", "m", 4) == ErrorCode.share_session_not_found
    assert code_of(sessions.acknowledge, "g", "m", 0) == ErrorCode.invalid_share_session_epoch
    sessions.fetch("g", "m", 0, [(T, 0)])
    assert code_of(sessions.fetch, "g", "m", 5) == ErrorCode.invalid_share_session_epoch
    assert sessions.fetch("g", "m", 1) is not None


def test_the_final_epoch_closes_the_session_and_reopening_replaces_it() -> None:
    """Epoch -1 closes the session (None); a new epoch 0 opens a fresh one from epoch 1."""
    sessions = ShareSessions()
    sessions.fetch("g", "m", 0, [(T, 0)])
    sessions.fetch("g", "m", 1)
    assert sessions.fetch("g", "m", -1) is None
    assert sessions.session("g", "m") is None
    assert code_of(sessions.acknowledge, "g", "m", -1) == ErrorCode.share_session_not_found
    sessions.fetch("g", "m", 0, [(T, 0)])
    again = sessions.fetch("g", "m", 0, [(T, 1)])
    assert again is not None and (again.epoch, again.partitions, len(sessions)) == (1, {(T, 1)}, 1)


def test_the_session_limit_is_enforced_and_a_leaving_member_frees_its_place() -> None:
    """Beyond ``group.share.max.share.sessions`` a new session is refused; closing one makes room."""
    sessions = ShareSessions(max_sessions=1)
    sessions.fetch("g", "m1", 0)
    assert code_of(sessions.fetch, "g", "m2", 0) == ErrorCode.share_session_limit_reached
    assert sessions.fetch("g", "m1", 0) is not None  # replacing one's own session is not a new one
    assert sessions.close_member("g", "m1") is not None
    assert sessions.fetch("g", "m2", 0) is not None
