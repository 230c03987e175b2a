"""The share partitions this node leads: ShareFetch acquires, ShareAcknowledge settles, locks expire.

Kafka's ``SharePartitionManager`` around the pure core (:mod:`kcoord.coordinator.share.partitions`
and :mod:`kcoord.coordinator.share.sessions`): this module does the I/O the core leaves out.

- **Loading.** A share partition is made on its first fetch from the share coordinator's stored
  state (ReadShareGroupState); with none, ``share.auto.offset.reset`` (the group config, else the
  broker's default) picks its start, and that initial state is written before any record of it is
  handed out. Concurrent first fetches of one share partition share one load.
- **Acquiring.** A fetch reads whole batches from the first Available offset and acquires what it
  may of them for the member; the bytes go out as stored and the client keeps only the acquired
  offsets.
- **Durability.** An acknowledgement is staged at once (its records stay Acquired, so no other
  member can acquire them and their lock cannot expire meanwhile), settled only once its
  WriteShareGroupState is durable, and answered then; a failed write unstages it, so memory is never
  ahead of disk (Kafka's rollback of a failed persist). Releases by lock expiry or a closed session
  are written too; nobody waits for them.
- **Write rounds.** Each share partition has at most one state write in flight. Whatever arrives
  meanwhile (acknowledgements of any member, releases, expiries) goes into the next write together,
  so sixteen consumers acknowledging one partition need a few writes, not sixteen in a queue.
- **Locks.** One timer on a timing wheel stands for the earliest lock deadline of all the share
  partitions; when it fires, every expired lock ends and the timer moves to the next deadline.
- **Disconnects.** When the connection that opened a share session closes, the session ends and
  the member's acquired records are released.
- **Waking.** A waiting ShareFetch is woken by an append to a fetched partition (the log's append
  listeners) or by records becoming Available again here (:meth:`watch`).
- **Cluster mode.** A share partition lives with its topic partition, on the node that owns it: it
  is loaded under that ownership's leader epoch, which the read of its state makes durable (so
  writes of the previous owner are fenced from then on) and every write of it carries; it is
  dropped when the topic partition is released (:meth:`drop_partition`). Its state may live on
  another node's ``__share_group_state`` partition: ``state`` routes the calls there.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any, Protocol

import structlog

from kcoord.coordinator.share.config import ShareGroupConfig
from kcoord.coordinator.share.partition_state import (
    AcknowledgeType,
    AcquiredRecords,
    SharePartitionView,
    acknowledgement_ranges,
)
from kcoord.coordinator.share.partitions import ShareGroupPartitions, StateWrite
from kcoord.coordinator.share.sessions import ShareSessions
from kcoord.coordinator.share.state_calls import ShareStateCalls
from kcoord.coordinator.share.state_records import ShareStateKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.runtime.timer_driver import TimerDriver
from kcoord.storage.api import PartitionLog
from kcoord.timer.api import Clock

__all__ = [
    "AcknowledgementBatch",
    "ShareDroppingHost",
    "ShareObserver",
    "SharePartitionLeader",
    "ShareState",
    "TopicIdPartition",
]

log = structlog.get_logger(__name__)

TopicIdPartition = tuple[uuid.UUID, int]
AcknowledgementBatch = tuple[int, int, tuple[int, ...]]
"""ShareFetch/ShareAcknowledge's (first offset, last offset, acknowledge types)."""

LogOf = Callable[[uuid.UUID, int], PartitionLog | None]
_LOCKS_TIMER = "share.locks"
_FENCED = frozenset({ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch})
_READ_ERRORS = {
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_state_epoch: ErrorCode.not_leader_or_follower,
}
"""A failed read of a share partition's state, as its fetch answers it (the client retries)."""


ShareState = ShareStateCalls
"""The share coordinator's state RPCs as the leader calls them (the local
:class:`~kcoord.runtime.share_coordinator.ShareCoordinator`, or in a cluster a router to the node
that owns the state's ``__share_group_state`` partition)."""


class ShareObserver(Protocol):
    """Told what the share partitions do (the Prometheus metrics at the edge)."""

    def acquired(self, records: int) -> None: ...

    def acknowledged(self, acknowledge_type: int, records: int) -> None:
        """Records acknowledged durably with this type (0 gap, 1 accept, 2 release, 3 reject)."""

    def locks_expired(self, records: int) -> None: ...

    def state_written(self, acknowledgements: int) -> None:
        """One write round of a share partition is durable, carrying this many acknowledgements."""


class _NoObserver:
    def acquired(self, records: int) -> None:
        return None

    def acknowledged(self, acknowledge_type: int, records: int) -> None:
        return None

    def locks_expired(self, records: int) -> None:
        return None

    def state_written(self, acknowledgements: int) -> None:
        return None


class _Rounds:
    """One share partition's write rounds: what waits for the next one, and whether one runs."""

    __slots__ = ("changed", "running", "waiters")

    def __init__(self) -> None:
        self.changed: set[int] = set()
        self.waiters: list[asyncio.Future[ErrorCode]] = []
        self.running = False


class SharePartitionLeader:
    """Every share partition of this node, its share sessions and the durable writes they need."""

    def __init__(
        self,
        config: ShareGroupConfig,
        state: ShareState,
        logs: LogOf,
        clock: Clock,
        *,
        max_sessions: int,
        auto_offset_reset: Callable[[str], str | None] = lambda group_id: None,
        on_loaded: Callable[[str, uuid.UUID, int], Awaitable[None]] | None = None,
        observer: ShareObserver | None = None,
        leader_epoch: Callable[[uuid.UUID, int], int | None] = lambda topic_id, partition: -1,
        missing_log_error: Callable[[uuid.UUID, int], ErrorCode] | None = None,
    ) -> None:
        """``on_loaded(group, topic id, partition)``: a share partition has durable state (the group
        coordinator records it as initialized); awaited in the background, a failure is logged.
        ``leader_epoch(topic id, partition)``: the epoch this node leads the topic partition under
        (-1 alone; None while it does not lead it). ``missing_log_error``: why the node has no log of
        a partition (in a cluster, NOT_LEADER_OR_FOLLOWER for one another node owns);
        UNKNOWN_TOPIC_OR_PARTITION by default."""
        self.config = config
        self.sessions = ShareSessions(max_sessions)
        self._partitions = ShareGroupPartitions(config)
        self._state = state
        self._logs = logs
        self._clock = clock
        self._reset = auto_offset_reset
        self._on_loaded = on_loaded
        self._observer: ShareObserver = observer or _NoObserver()
        self._driver = TimerDriver.for_clock(clock, self._on_locks_expired)
        self._loading: dict[tuple[str, uuid.UUID, int], asyncio.Future[None]] = {}
        self._background_tasks: set[asyncio.Task[None]] = set()
        self._waiters: set[asyncio.Event] = set()
        self._rounds: dict[tuple[str, uuid.UUID, int], _Rounds] = {}
        self._leader_epoch = leader_epoch
        self._missing_log_error = missing_log_error
        self._epochs: dict[tuple[str, uuid.UUID, int], int] = {}
        """The leader epoch each share partition was loaded under (its writes carry it)."""

    def start(self) -> None:
        self._driver.start()

    async def stop(self) -> None:
        await self._driver.stop()
        if self._background_tasks:
            await asyncio.wait(set(self._background_tasks), timeout=5)

    # -- loading

    async def ensure_loaded(self, group_id: str, tp: TopicIdPartition) -> None:
        """Make the share partition if this node does not have it yet; raises KafkaError on failure."""
        if self._partitions.get(group_id, tp) is not None:
            return
        key = (group_id, *tp)
        pending = self._loading.get(key)
        if pending is not None:
            await asyncio.shield(pending)
            if self._partitions.get(group_id, tp) is None:
                raise KafkaError(ErrorCode.coordinator_load_in_progress, "share partition is loading")
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._loading[key] = done
        try:
            await self._load(group_id, tp)
        finally:
            done.set_result(None)
            del self._loading[key]

    async def _load(self, group_id: str, tp: TopicIdPartition) -> None:
        partition_log = self.log_of(tp)
        epoch = self._leader_epoch(*tp)
        if epoch is None:
            raise KafkaError(ErrorCode.not_leader_or_follower, f"this node does not lead {tp}")
        try:
            stored = await self._state.read_for_leader(ShareStateKey(group_id, *tp), epoch)
        except KafkaError as exc:  # as Kafka's SharePartition answers a persister error
            raise KafkaError(_READ_ERRORS.get(exc.code, exc.code), exc.message) from None
        if self._logs(*tp) is not partition_log:  # released (or moved and back) while it read
            raise KafkaError(self._missing_error(tp), f"{tp} moved while its share state loaded")
        self._epochs[(group_id, *tp)] = epoch
        write = self._partitions.load(
            group_id,
            tp,
            stored,
            partition_log.log_start_offset,
            partition_log.log_end_offset,
            self._reset(group_id),
        )
        if write is not None:
            code = await self._state.write_state(write, epoch)
            if code != ErrorCode.none:
                self._forget(group_id, tp)
                raise KafkaError(code, f"the initial state of {group_id} {tp} was not written")
        share = self._partitions.get(group_id, tp)
        log.info(
            "share_partition.loaded",
            group=group_id,
            topic_id=str(tp[0]),
            partition=tp[1],
            start_offset=None if share is None else share.start_offset,
            restored=write is None,
            leader_epoch=epoch,
        )
        if self._on_loaded is not None:
            self._background(self._report_loaded(self._on_loaded(group_id, *tp), group_id))

    async def _report_loaded(self, reported: Awaitable[None], group_id: str) -> None:
        try:
            await reported
        except Exception as exc:  # the group's next heartbeat asks again; nothing is lost
            log.warning("share_partition.initialized_not_recorded", group=group_id, error=repr(exc))

    def log_of(self, tp: TopicIdPartition) -> PartitionLog:
        """The partition's log on this node; UNKNOWN_TOPIC_OR_PARTITION when there is none."""
        partition_log = self._logs(*tp)
        if partition_log is None:
            raise KafkaError(self._missing_error(tp), f"no log of partition {tp} here")
        return partition_log

    def _missing_error(self, tp: TopicIdPartition) -> ErrorCode:
        if self._missing_log_error is None:
            return ErrorCode.unknown_topic_or_partition
        return self._missing_log_error(*tp)

    def drop_partition(self, tp: TopicIdPartition) -> None:
        """This node no longer owns the topic partition (cluster mode): every share partition of it
        goes from memory. A write round under way is answered by its own outcome; the next owner
        loads the durable state, in which records acquired here are Available again."""
        groups = self._partitions.groups_of(tp)
        for group_id in groups:
            self._forget(group_id, tp)
        if groups:
            self._notify()
            log.info("share_partitions.dropped", topic_id=str(tp[0]), partition=tp[1], groups=len(groups))

    def _forget(self, group_id: str, tp: TopicIdPartition) -> None:
        self._partitions.forget(group_id, tp)
        self._epochs.pop((group_id, *tp), None)

    # -- fetching

    async def acquire(
        self, group_id: str, member_id: str, tp: TopicIdPartition, max_records: int, max_bytes: int
    ) -> tuple[bytes, list[AcquiredRecords]]:
        """Read from the first Available offset and acquire what the member may have of it: the
        bytes of the batches up to the last acquired offset, and the acquired runs."""
        share = self._partitions.get(group_id, tp)
        if share is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"{group_id} has no share partition {tp}")
        partition_log = self.log_of(tp)
        share.advance_to_log_start(partition_log.log_start_offset)
        offset = max(share.next_fetch_offset(), partition_log.log_start_offset)
        if offset >= partition_log.log_end_offset:
            return b"", []
        data = await partition_log.read_async(offset, max(max_bytes, 1))
        batches = [
            (pos + header.size, header.base_offset, header.base_offset + header.last_offset_delta)
            for pos, header in iter_batches(data)
        ]
        if not batches:
            return b"", []
        fetched = (max(offset, batches[0][1]), batches[-1][2])
        now_ms = self._clock.now_ms()
        acquired = self._partitions.acquire(group_id, member_id, tp, fetched, now_ms, max_records)
        if not acquired:
            return b"", []
        self._observer.acquired(sum(a.last_offset - a.first_offset + 1 for a in acquired))
        self._arm_locks()
        last = acquired[-1].last_offset
        cut = next(end for end, _, batch_last in batches if batch_last >= last)
        return data[:cut], acquired

    # -- acknowledging

    async def acknowledge(
        self, group_id: str, member_id: str, tp: TopicIdPartition, batches: Iterable[AcknowledgementBatch]
    ) -> ErrorCode:
        """Settle one partition's acknowledgements (all or nothing); answered once durable. Renewals
        (KIP-1222) extend their records' locks at once and write nothing, as Kafka's."""
        try:
            ranges = [r for first, last, types in batches for r in acknowledgement_ranges(first, last, types)]
            if self._partitions.get(group_id, tp) is None:
                raise KafkaError(ErrorCode.invalid_record_state, f"{group_id} holds nothing of {tp}")
            renewed, staged = self._partitions.stage(group_id, member_id, tp, ranges, self._clock.now_ms())
        except KafkaError as exc:
            return exc.code
        if renewed:
            self._observer.acknowledged(AcknowledgeType.RENEW, renewed)
        if not staged:
            return ErrorCode.none
        answered: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        self._next_round(group_id, tp).waiters.append(answered)
        return await answered

    def _next_round(self, group_id: str, tp: TopicIdPartition, changed: Iterable[int] = ()) -> _Rounds:
        """The share partition's next write round, with ``changed`` in it; started if none runs."""
        key = (group_id, *tp)
        rounds = self._rounds.get(key)
        if rounds is None:
            rounds = self._rounds[key] = _Rounds()
        rounds.changed.update(changed)
        if not rounds.running:
            rounds.running = True
            self._background(self._write_rounds(group_id, tp, rounds))
        return rounds

    async def _write_rounds(self, group_id: str, tp: TopicIdPartition, rounds: _Rounds) -> None:
        """Write rounds while anything waits: one state write each, answered once it is durable."""
        try:
            while rounds.waiters or rounds.changed:
                waiters, rounds.waiters = rounds.waiters, []
                changed, rounds.changed = rounds.changed, set()
                write = self._partitions.begin_round(group_id, tp, changed)
                code = ErrorCode.unknown_topic_or_partition if write is None else await self._write(write)
                settled = self._partitions.end_round(group_id, tp, durable=code == ErrorCode.none)
                if code == ErrorCode.none:
                    for kind, records in settled.items():
                        self._observer.acknowledged(kind, records)
                    self._observer.state_written(len(waiters))
                else:
                    if code in _FENCED:  # another leader wrote since: this copy is stale
                        self._forget(group_id, tp)
                    log.warning(
                        "share.state_write_failed",
                        group=group_id,
                        topic_id=str(tp[0]),
                        partition=tp[1],
                        acknowledgements=len(waiters),
                        error=code.name,
                    )
                    self._arm_locks()  # unstaged records' locks run again
                self._notify()
                for answered in waiters:
                    if not answered.done():
                        answered.set_result(code)
        finally:
            rounds.running = False
            if self._rounds.get((group_id, *tp)) is rounds:
                del self._rounds[(group_id, *tp)]
            for answered in rounds.waiters:
                if not answered.done():
                    answered.set_result(ErrorCode.unknown_server_error)

    async def _write(self, write: StateWrite) -> ErrorCode:
        key = write.key
        try:
            return await self._state.write_state(
                write, self._epochs.get((key.group_id, key.topic_id, key.partition), -1)
            )
        except KafkaError as exc:
            return exc.code
        except Exception as exc:  # every waiter must still be answered
            log.error("share.state_write_error", group=write.key.group_id, error=repr(exc), exc_info=exc)
            return ErrorCode.unknown_server_error

    async def delete_groups(self, group_ids: list[str]) -> None:
        """DeleteGroups removed these (empty) groups: their share partitions here and their durable
        state go too, so a new group of the same id starts afresh."""
        for group_id in group_ids:
            for tp in self.led_partitions(group_id):
                self._forget(group_id, tp)
        await self._state.delete_group_states(group_ids)

    # -- admin (Describe/Alter/DeleteShareGroupOffsets; the caller checks the group)

    async def describe_offset(self, group_id: str, tp: TopicIdPartition) -> tuple[int, int, int]:
        """(start offset, leader epoch, lag) of one share partition: the live state when this node
        has it in memory, else the durable one; -1s when it has no state."""
        partition_log = self._logs(*tp)
        log_end = -1 if partition_log is None else partition_log.log_end_offset
        share = self._partitions.get(group_id, tp)
        if share is not None:
            view = share.describe(log_end if log_end >= 0 else share.end_offset)
            return view.start_offset, 0, view.lag if log_end >= 0 else -1
        stored = await self._state.stored_state(ShareStateKey(group_id, *tp))
        if stored is None or stored.start_offset < 0:
            return -1, -1, -1
        done = max(stored.delivery_complete_count, 0)
        lag = -1 if log_end < 0 else max(0, log_end - stored.start_offset - done)
        return stored.start_offset, stored.leader_epoch, lag

    async def alter_offset(self, group_id: str, tp: TopicIdPartition, start_offset: int) -> ErrorCode:
        """Start the (empty) group's share partition afresh at ``start_offset``: a new state epoch with
        nothing in flight; the next fetch loads it from there."""
        if start_offset < 0:
            return ErrorCode.invalid_request
        self._forget(group_id, tp)
        return await self._state.initialize_state(ShareStateKey(group_id, *tp), start_offset)

    async def delete_offsets(self, group_id: str, tps: list[TopicIdPartition]) -> None:
        """Forget the (empty) group's share partitions: the next fetch starts by share.auto.offset.reset."""
        for tp in tps:
            self._forget(group_id, tp)
        await self._state.delete_states([ShareStateKey(group_id, *tp) for tp in tps])

    def partition_views(self, group_id: str) -> dict[TopicIdPartition, SharePartitionView]:
        """What this node holds in memory of the group's share partitions (``/v1/groups``), the lag
        against each log's end."""
        log_ends = {}
        for tp in self.led_partitions(group_id):
            partition_log = self._logs(*tp)
            if partition_log is not None:
                log_ends[tp] = partition_log.log_end_offset
        return self._partitions.describe(group_id, log_ends)

    def led_partitions(self, group_id: str) -> list[TopicIdPartition]:
        return list(self._partitions.describe(group_id, {}))

    def connection_closed(self, group_id: str, member_id: str, session: object) -> None:
        """The connection that opened ``session`` closed: as Kafka 4.1+, the session goes and the
        member's acquired records are released at once rather than when their locks expire (a
        session the member has since reopened elsewhere is left alone)."""
        if self.sessions.session(group_id, member_id) is session:
            self.sessions.close_member(group_id, member_id)
            self.release_member(group_id, member_id)

    def release_member(self, group_id: str, member_id: str) -> None:
        """The member's share session closed: its acquired records go back (written, not awaited)."""
        self._persist(self._partitions.release_member(group_id, member_id))

    # -- locks and waking

    def _arm_locks(self) -> None:
        deadline = self._partitions.next_lock_deadline()
        if deadline is not None:
            self._driver.schedule(_LOCKS_TIMER, deadline)

    def _on_locks_expired(self, keys: list[str]) -> None:
        writes = self._partitions.expire_locks(self._clock.now_ms())
        self._observer.locks_expired(
            sum(b.last_offset - b.first_offset + 1 for w in writes for b in w.batches)
        )
        self._persist(writes)
        self._arm_locks()

    def partition_count(self) -> int:
        """The share partitions this node leads (for a gauge)."""
        return self._partitions.count()

    def _persist(self, writes: list[StateWrite]) -> None:
        """Releases and expiries already applied here: written in each partition's next round."""
        if not writes:
            return
        self._notify()
        for write in writes:
            changed = [o for batch in write.batches for o in range(batch.first_offset, batch.last_offset + 1)]
            self._next_round(write.key.group_id, (write.key.topic_id, write.key.partition), changed)

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_tasks.discard)

    def _notify(self) -> None:
        for event in self._waiters:
            event.set()

    @contextlib.contextmanager
    def watch(self, logs: Iterable[PartitionLog]) -> Iterator[asyncio.Event]:
        """An event set when records may have become available: an append to one of ``logs``, or a
        release, expiry or acknowledgement here. Leaving the block unregisters it."""
        event = asyncio.Event()
        unregister = [partition_log.add_append_listener(lambda end: event.set()) for partition_log in logs]
        self._waiters.add(event)
        try:
            yield event
        finally:
            self._waiters.discard(event)
            for undo in unregister:
                undo()


class TopicPartitionHost(Protocol):
    """What serves a topic's partitions a cluster node owns (the membership's ``PartitionHost``)."""

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None: ...

    async def release(self, partition: int) -> None: ...


class ShareDroppingHost:
    """A topic's partition host that first drops the share partitions of a partition it releases,
    so share partitions move and fence with their topic partition."""

    def __init__(
        self,
        inner: TopicPartitionHost,
        topic_id: Callable[[], uuid.UUID | None],
        leader: SharePartitionLeader,
    ) -> None:
        self._inner = inner
        self._topic_id = topic_id
        self._leader = leader

    async def acquire(self, partition: int, partition_log: PartitionLog) -> None:
        await self._inner.acquire(partition, partition_log)

    async def release(self, partition: int) -> None:
        topic_id = self._topic_id()
        if topic_id is not None:
            self._leader.drop_partition((topic_id, partition))
        await self._inner.release(partition)
