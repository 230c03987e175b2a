"""The group APIs' view of the coordinator: one typed method per API.

The edge never sees a shard: each method picks the group's partition, runs the matching shard
operation there (a write whose answer is released once its records are durable, or a read of
the current state) and returns the core's response type. The runtime underneath
(:class:`GroupCoordinator`) stays generic over what a shard is.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kcoord.coordinator.classic.messages import (
    DeleteGroupResult,
    DescribedGroup,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kcoord.coordinator.consumer.messages import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
)
from kcoord.coordinator.offsets import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetDeleteTopic,
    OffsetFetchResponse,
    OffsetFetchTopic,
)
from kcoord.coordinator.result import CoordinatorResult
from kcoord.coordinator.shard import GroupCoordinatorShard
from kcoord.coordinator.share.messages import (
    DescribedShareGroup,
    ShareHeartbeatRequest,
    ShareHeartbeatResponse,
)
from kcoord.coordinator.txn_offset_commit import TxnOffsetCommitRequest
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_coordinator import GroupCoordinator
from kcoord.runtime.pattern_worker import PatternWorker
from kcoord.runtime.regex_matching import RegexMatching
from kcoord.runtime.runner import Sink


@dataclass(frozen=True, slots=True)
class GroupListing:
    """The groups of every loaded partition; ``complete`` is False while some partition loads."""

    groups: list[ListedGroup]
    complete: bool


class GroupService:
    def __init__(
        self,
        coordinator: GroupCoordinator,
        groups_deleted: Callable[[list[str]], Awaitable[None]] | None = None,
        *,
        patterns: PatternWorker,
    ) -> None:
        """``groups_deleted``: after DeleteGroups, with the ids it deleted (the share coordinator
        deletes their share-partition state). ``patterns``: where regex subscriptions too long to
        match on the coordinator's turn are matched (see :mod:`kcoord.runtime.regex_matching`)."""
        self._coordinator = coordinator
        self._groups_deleted = groups_deleted
        self._regex_matching = RegexMatching(coordinator, patterns)

    async def stop(self) -> None:
        """Cancel the regex matches in flight (before the pattern worker closes)."""
        await self._regex_matching.stop()

    # -- membership

    async def join_group(self, request: JoinGroupRequest, connection_id: int) -> JoinGroupResponse:
        def join(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.join_group(request, sink, now_ms, connection_id)

        response: JoinGroupResponse = await self._coordinator.write(request.group_id, join)
        return response

    async def sync_group(self, request: SyncGroupRequest, connection_id: int) -> SyncGroupResponse:
        def sync(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.sync_group(request, sink, now_ms, connection_id)

        response: SyncGroupResponse = await self._coordinator.write(request.group_id, sync)
        return response

    def heartbeat(self, request: HeartbeatRequest, connection_id: int) -> ErrorCode:
        """Answered at once (it never parks and never writes); raises while the partition loads."""
        return self._coordinator.heartbeat(request, connection_id)

    async def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        def leave(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.leave_group(request, sink, now_ms)

        response: LeaveGroupResponse = await self._coordinator.write(request.group_id, leave)
        return response

    def member_disconnected(self, group_id: str, member_id: str, connection_id: int) -> None:
        """A connection that carried this member closed (a fast-failover hint)."""
        self._coordinator.member_disconnected(group_id, member_id, connection_id)

    # -- consumer groups (KIP-848)

    async def consumer_heartbeat(
        self, request: ConsumerHeartbeatRequest, connection_id: int
    ) -> ConsumerHeartbeatResponse:
        def beat(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.consumer_heartbeat(request, sink, now_ms, connection_id)

        try:
            response: ConsumerHeartbeatResponse = await self._coordinator.write(request.group_id, beat)
        finally:
            self._regex_matching.start_jobs(request.group_id)
        return response

    def describe_consumer_group(self, group_id: str) -> tuple[DescribedConsumerGroup | None, bool]:
        """The consumer group, or None; and whether a classic group has that id."""

        def describe(shard: GroupCoordinatorShard) -> tuple[DescribedConsumerGroup | None, bool]:
            return shard.describe_consumer_group(group_id), shard.is_classic_group(group_id)

        return self._coordinator.read(group_id, describe)

    # -- share groups (KIP-932)

    async def share_heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        def beat(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.share_heartbeat(request, sink, now_ms)

        response: ShareHeartbeatResponse = await self._coordinator.write(request.group_id, beat)
        return response

    async def share_partition_initialized(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """Record in the group's ShareGroupStatePartitionMetadata that the partition has state."""

        def record(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            result = shard.share_partition_initialized(group_id, topic_id, partition)
            result.respond(sink, None)
            return result

        await self._coordinator.write(group_id, record)

    def share_group_partitions(self, group_id: str) -> dict[uuid.UUID, tuple[int, ...]]:
        """The share partitions the group records as having state (ShareGroupStatePartitionMetadata)."""

        def read(shard: GroupCoordinatorShard) -> dict[uuid.UUID, tuple[int, ...]]:
            return shard.share.initialized_partitions(group_id)

        return self._coordinator.read(group_id, read)

    def describe_share_group(self, group_id: str) -> DescribedShareGroup:
        def describe(shard: GroupCoordinatorShard) -> DescribedShareGroup:
            return shard.describe_share_groups([group_id])[0]

        return self._coordinator.read(group_id, describe)

    # -- offsets

    def commit_offsets(self, request: OffsetCommitRequest) -> Awaitable[OffsetCommitResponse]:
        """The commit's write, to await (a plain function: one coroutine less on every commit; the
        shard's method, unbound: no closure per commit)."""

        response: Awaitable[OffsetCommitResponse] = self._coordinator.write_request(
            request.group_id, GroupCoordinatorShard.commit_offsets, request
        )
        return response

    async def commit_transactional_offsets(self, request: TxnOffsetCommitRequest) -> OffsetCommitResponse:
        """TxnOffsetCommit: written as a transactional batch of the request's producer."""

        def commit(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.commit_transactional_offsets(request, sink, now_ms)

        response: OffsetCommitResponse = await self._coordinator.write_transactional(
            request.group_id, commit, request.producer_id, request.producer_epoch
        )
        return response

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[OffsetFetchTopic] | None,
        require_stable: bool,
        member: tuple[str | None, int] = (None, -1),
    ) -> OffsetFetchResponse:
        def fetch(shard: GroupCoordinatorShard) -> OffsetFetchResponse:
            return shard.fetch_offsets(group_id, topics, require_stable, member)

        return self._coordinator.read(group_id, fetch)

    async def offsets_settled(self, group_id: str) -> None:
        """Wait for the writes already under way on the group's partition (OffsetFetch's
        ``require_stable``, served after them as Kafka serves it as a write): a TxnOffsetCommit
        still being appended is then pending, and answered UNSTABLE_OFFSET_COMMIT."""
        await self._coordinator.writes_settled(group_id)

    async def delete_offsets(self, group_id: str, topics: list[OffsetDeleteTopic]) -> OffsetDeleteResponse:
        def delete(shard: GroupCoordinatorShard, sink: Sink, now_ms: int) -> CoordinatorResult:
            return shard.delete_offsets(group_id, topics, sink, now_ms)

        response: OffsetDeleteResponse = await self._coordinator.write(group_id, delete)
        return response

    # -- admin

    def list_groups(self, states_filter: Collection[str] | None) -> GroupListing:
        shards: list[GroupCoordinatorShard] = list(self._coordinator.active_shards())
        groups = [listed for shard in shards for listed in shard.list_groups(states_filter)]
        return GroupListing(groups, complete=len(shards) >= self._coordinator.num_partitions)

    def describe_group(self, group_id: str, api_version: int) -> DescribedGroup:
        def describe(shard: GroupCoordinatorShard) -> DescribedGroup:
            return shard.describe_group(group_id, api_version)

        return self._coordinator.read(group_id, describe)

    async def delete_groups(self, group_ids: list[str]) -> list[DeleteGroupResult]:
        """One write per offsets partition; a partition that fails answers its error for its groups."""
        by_partition: dict[int, list[str]] = defaultdict(list)
        for group_id in group_ids:
            by_partition[self._coordinator.partition_for(group_id)].append(group_id)
        results: list[DeleteGroupResult] = []
        for batch in by_partition.values():

            def delete(
                shard: GroupCoordinatorShard, sink: Sink, now_ms: int, batch: list[str] = batch
            ) -> CoordinatorResult:
                return shard.delete_groups(batch, sink, now_ms)

            try:
                answers: list[DeleteGroupResult] = await self._coordinator.write(batch[0], delete)
            except KafkaError as exc:
                results.extend(DeleteGroupResult(group_id, exc.code) for group_id in batch)
                continue
            results.extend(answers)
        deleted = [r.group_id for r in results if r.error_code == ErrorCode.none]
        if deleted and self._groups_deleted is not None:
            await self._groups_deleted(deleted)
        return results
