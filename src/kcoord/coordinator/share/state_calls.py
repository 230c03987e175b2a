"""The share coordinator's state calls, as a share partition leader makes them.

Kafka's share partition leader reaches the share coordinator through its persister: locally, or
with ReadShareGroupState / WriteShareGroupState when another node owns the state's
``__share_group_state`` partition. Both the runtime's share coordinator and the cluster's router
answer this one contract, so it is declared here, below both (only types: nothing here runs).
"""

from __future__ import annotations

from typing import Protocol

from kcoord.coordinator.share.partitions import StateWrite
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.coordinator.share.state_shard import StoredShareState
from kcoord.protocol.errors import ErrorCode

__all__ = ["ShareStateCalls"]


class ShareStateCalls(Protocol):
    """Read, write, initialize and delete the durable state of share partitions."""

    async def read_for_leader(
        self, key: ShareStateKey, leader_epoch: int = -1
    ) -> StoredShareState | None: ...

    async def write_state(self, write: StateWrite, leader_epoch: int = -1) -> ErrorCode: ...

    async def initialize_state(self, key: ShareStateKey, start_offset: int) -> ErrorCode: ...

    async def stored_state(self, key: ShareStateKey) -> StoredShareState | None: ...

    async def delete_states(self, keys: list[ShareStateKey]) -> None: ...

    async def delete_group_states(self, group_ids: list[str]) -> None: ...
