"""Share sessions: what ShareFetch and ShareAcknowledge carry between requests (KIP-932).

A share consumer keeps one session per broker, keyed by (group id, member id). Its
``ShareSessionEpoch`` works as follows:

======  =========================================================================================
0       open a session (replacing any the member had): the request names every partition it wants
        (ShareAcknowledge may not open one: INVALID_SHARE_SESSION_EPOCH)
n > 0   the next request of the session: ``n`` must be the epoch the session expects
        (INVALID_SHARE_SESSION_EPOCH), the session must exist (SHARE_SESSION_NOT_FOUND); the request
        adds partitions and forgets others
-1      the final request: acknowledgements only, then the session closes and the member's
        acquired records are released by the caller
======  =========================================================================================

The epoch after ``2**31 - 1`` is 1. At most ``group.share.max.share.sessions`` sessions are open
(SHARE_SESSION_LIMIT_REACHED). Sessions are soft state: a restart forgets them and clients open
new ones.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "ShareSession", "ShareSessions"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SESSIONS = 2_000
"""``group.share.max.share.sessions``."""

TopicIdPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1
    """The epoch the session's next request must carry."""
    partitions: set[TopicIdPartition] = field(default_factory=set)


class ShareSessions:
    """The open share sessions of one broker."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self._max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def session(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: Iterable[TopicIdPartition] = (),
        forgotten: Iterable[TopicIdPartition] = (),
    ) -> ShareSession | None:
        """Check a ShareFetch's session epoch and apply its partitions.

        Returns the session to fetch for, or None for the final fetch (-1: the session closed).
        Raises KafkaError with Kafka's code when the epoch does not fit."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if key not in self._sessions and len(self._sessions) >= self._max_sessions:
                raise KafkaError(
                    ErrorCode.share_session_limit_reached, f"{self._max_sessions} sessions are open"
                )
            opened = self._sessions[key] = ShareSession(group_id, member_id, 1, set(added))
            return opened
        session = self._next(key, epoch)
        if session is not None:
            session.partitions.difference_update(forgotten)
            session.partitions.update(added)
        return session

    def acknowledge(self, group_id: str, member_id: str, epoch: int) -> ShareSession | None:
        """Check a ShareAcknowledge's session epoch (None: the final request closed the session)."""
        if epoch == INITIAL_EPOCH:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session"
            )
        return self._next((group_id, member_id), epoch)

    def close_member(self, group_id: str, member_id: str) -> ShareSession | None:
        """The member left its group (or its connection closed): its session goes."""
        return self._sessions.pop((group_id, member_id), None)

    def _next(self, key: tuple[str, str], epoch: int) -> ShareSession | None:
        session = self._sessions.get(key)
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found, f"no share session for member {key[1]}")
        if epoch == FINAL_EPOCH:
            del self._sessions[key]
            return None
        if epoch != session.epoch:
            raise KafkaError(
                ErrorCode.invalid_share_session_epoch,
                f"share session epoch {epoch}, expected {session.epoch}",
            )
        session.epoch = 1 if session.epoch == _MAX_EPOCH else session.epoch + 1
        return session
