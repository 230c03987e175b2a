"""ListOffsets (key 2), versions 1-7.

- v1: one timestamp per partition; the answer is one offset and its timestamp.
- v2: ``isolation_level`` (READ_COMMITTED reads up to the last stable offset).
- v3: no change to the body.
- v4: ``current_leader_epoch`` in the request, ``leader_epoch`` in the response.
- v5: no change to the body.
- v6: flexible.
- v7: timestamp -3 (MAX_TIMESTAMP, KIP-734).
- v8+ (-4 earliest local, tiered storage) are not served. v0 (old-style offset lists) neither:
  every client in use sends v1 or later.

Isolation (v2+): READ_COMMITTED reads up to the partition's last stable offset (the first offset of
its oldest open transaction, :mod:`kcoord.cluster.partition_transactions`): -1 answers the LSO, and
a lookup by timestamp (or -3) whose answer is at or past the LSO answers -1, as Kafka's
``fetchOffsetForTimestamp`` does. READ_UNCOMMITTED reads up to the log end.

Special timestamps: -2 => the log start offset (which DeleteRecords moves), -1 => the log end
offset (the LSO under READ_COMMITTED), both with timestamp -1; -3 =>
the first record holding the largest timestamp. Any other value => the first record at or after
the log start whose timestamp is >= it, as Kafka answers: the log's time index finds the batch,
and only that batch is decoded (:mod:`kcoord.storage.record_search`); a batch whose codec is not
available here is answered with its base offset and max timestamp. Not found => offset -1,
timestamp -1.

Leader epochs (v4+, see :mod:`kcoord.cluster.leader_epochs`): ``current_leader_epoch`` is checked
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), and ``leader_epoch`` is, as Kafka answers, the
leader's epoch for the log end, and the epoch stamped on the batch holding the answer otherwise
(-1 for a batch stored before kcoord stamped epochs; the leader's for an empty log's start).
UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER per partition.

Authorization: Topic DESCRIBE per topic, else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.error_answers import each_partition
from kcoord.apis.wiring import own_api
from kcoord.cluster.leader_epochs import NO_EPOCH, led_log
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.record_batch import batch_leader_epoch
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import PartitionLog
from kcoord.storage.record_search import FoundRecord, first_record_at_or_after, first_record_with_timestamp

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


def list_offsets_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"topics": each_partition(request.topics, lambda index: _answer(index, code))}


async def handle_list_offsets(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    authorizer: Authorizer,
    producers: ProducerStateManager | None = None,
) -> dict[str, Any]:
    """Topic DESCRIBE per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions."""
    committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
    return {
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    _answer(int(p.partition_index), ErrorCode.topic_authorization_failed)
                    if not may_topic(ctx, authorizer, Op.DESCRIBE, t.name)
                    else _stable_only(
                        await _lookup(
                            int(p.partition_index),
                            int(p.timestamp),
                            *led_log(topics, t.name, int(p.partition_index), _current_epoch(p)),
                        ),
                        _readable_end(topics, producers, t.name, int(p.partition_index), committed=committed),
                    )
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ]
    }


def _readable_end(
    topics: TopicManager,
    producers: ProducerStateManager | None,
    topic: str,
    partition: int,
    *,
    committed: bool,
) -> int | None:
    """The LSO of a partition this node holds when reading committed data; None otherwise."""
    if not committed or producers is None:
        return None
    partition_log = topics.partition_log(topic, partition)
    if partition_log is None:
        return None
    return producers.last_stable_offset(
        topic, partition, partition_log.log_end_offset, partition_log.log_start_offset
    )


def _stable_only(answer: dict[str, Any], stable: int | None) -> dict[str, Any]:
    """``answer`` seen by a read_committed client: the log end is the LSO; past it, nothing."""
    if stable is None or answer["error_code"] != ErrorCode.none or answer["offset"] < stable:
        return answer
    if answer["timestamp"] == -1 and answer["offset"] >= 0:
        return {**answer, "offset": stable}
    return _answer(answer["partition_index"], ErrorCode.none)


def _current_epoch(partition: Any) -> int:
    return int(getattr(partition, "current_leader_epoch", NO_EPOCH))


async def _lookup(
    index: int, timestamp: int, partition_log: PartitionLog | None, missing: ErrorCode
) -> dict[str, Any]:
    if partition_log is None:
        return _answer(index, missing)
    if timestamp == LATEST_TIMESTAMP:
        return _answer(index, ErrorCode.none, partition_log.log_end_offset, epoch=partition_log.leader_epoch)
    if timestamp == EARLIEST_TIMESTAMP:
        return _answer(
            index, ErrorCode.none, partition_log.log_start_offset, epoch=await _epoch_at_start(partition_log)
        )
    if timestamp == MAX_TIMESTAMP:
        return await _max_timestamp(index, partition_log)
    return await _by_timestamp(index, timestamp, partition_log)


async def _epoch_at_start(partition_log: PartitionLog) -> int:
    """The epoch of the batch holding the log start (Kafka: the earliest cached epoch, which starts
    there); the leader's own when the log is empty."""
    start = partition_log.log_start_offset
    if start >= partition_log.log_end_offset:
        return partition_log.leader_epoch
    return batch_leader_epoch(await partition_log.read_async(start, 1))


async def _max_timestamp(index: int, partition_log: PartitionLog) -> dict[str, Any]:
    base_offset, max_timestamp = partition_log.max_timestamp()
    if base_offset < 0:
        return _answer(index, ErrorCode.none)
    batch = await partition_log.read_async(max(base_offset, partition_log.log_start_offset), 1)
    epoch = batch_leader_epoch(batch)
    record = first_record_with_timestamp(batch, max_timestamp)
    if record is None:
        return _answer(index, ErrorCode.none, base_offset, max_timestamp, epoch)
    return _answer(index, ErrorCode.none, record.offset, record.timestamp, epoch)


async def _by_timestamp(index: int, timestamp: int, partition_log: PartitionLog) -> dict[str, Any]:
    found = partition_log.offset_for_timestamp(timestamp)
    if found is None or found[0] < 0:
        return _answer(index, ErrorCode.none)
    offset = max(found[0], partition_log.log_start_offset)
    while offset < partition_log.log_end_offset:
        batch = await partition_log.read_async(offset, 1)
        result = first_record_at_or_after(batch, timestamp, min_offset=partition_log.log_start_offset)
        if isinstance(result, FoundRecord):
            return _answer(index, ErrorCode.none, result.offset, result.timestamp, batch_leader_epoch(batch))
        if result is None:
            return _answer(index, ErrorCode.none, found[0], found[1], batch_leader_epoch(batch))
        offset = result.next_offset
    return _answer(index, ErrorCode.none)


def _answer(
    index: int, code: ErrorCode, offset: int = -1, timestamp: int = -1, epoch: int = NO_EPOCH
) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": code,
        "timestamp": timestamp,
        "offset": offset,
        "leader_epoch": epoch,
    }


api = own_api(ApiKey.LIST_OFFSETS, "ListOffsets", 1, 7, handle_list_offsets, list_offsets_error)
