"""Fetch (key 1), versions 4-12.

- v4: ``isolation_level``, ``last_stable_offset`` and ``aborted_transactions``; record batch v2
  (librdkafka needs Fetch >= 4 and Produce >= 3 to use it). kio's first schema.
- v5: ``log_start_offset`` in the request and the response.
- v6: no change to the body.
- v7: fetch sessions (``session_id``, ``session_epoch``, ``forgotten_topics_data``); top-level
  ``error_code``.
- v8, v10: no change to the body. v9: ``current_leader_epoch`` per partition, checked as Kafka
  does (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH, see :mod:`kcoord.cluster.leader_epochs`).
- v11: ``rack_id`` in the request, ``preferred_read_replica`` in the response.
- v12: flexible; ``last_fetched_epoch`` and ``diverging_epoch``: Kafka answers a diverging epoch
  when the fetch offset is past the end of the fetcher's last fetched epoch (its followers rely on
  it; librdkafka and Java's consumer send none, kafka-python does). kcoord's shared logs never
  diverge, so no position read from them can be past the end of its epoch: it is not looked up.
- v13+ name topics by id; not served.

What kcoord answers:

- **No fetch sessions:** ``session_id`` is always 0, which tells clients to send full fetches;
  ``forgotten_topics_data`` is ignored. ``rack_id`` is accepted.
- **Transactions:** ``last_stable_offset`` is the partition's LSO (the first offset of its oldest
  open transaction, else the log end; :mod:`kcoord.cluster.partition_transactions`). With
  ``isolation_level`` 1 (read_committed) a partition is read up to its LSO only, in whole batches,
  and ``aborted_transactions`` lists the aborted transactions overlapping the range read (their
  producer id and first offset), from which the consumer drops those producers' records up to
  each abort marker. The range ends at the LSO when one transaction qualifies (a bound past the
  data returned, as Kafka's segment bound can be: clients act only on those they meet), else at
  the end of the data returned, so a consumer far behind is not sent every abort up to the LSO.
  Control batches (markers) go out like any batch, as Kafka's do: every client skips them.
- **Sizes (KIP-74):** partitions are read in request order, each up to
  min(``partition_max_bytes``, what is left of ``max_bytes``), in whole batches; the first
  partition that has data always gets at least one whole batch, however large. A later
  partition whose next batch does not fit gets no data this time.
- **Long poll:** the answer goes out at once when at least ``min_bytes`` are available, a
  partition has an error, or ``max_wait_ms`` is 0; otherwise the Fetch waits, woken by the first
  append to any of its partitions (:mod:`kcoord.cluster.fetch_waiters`), and answers with what is
  there when ``max_wait_ms`` passes. Waiting suspends only this request.
- Errors per partition: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_OUT_OF_RANGE (offset outside
  [log start, log end]). ``replica_id >= 0`` (a follower) => NOT_LEADER_OR_FOLLOWER: kcoord has
  no followers.
- Record bytes go out exactly as stored; consumers skip records before their fetch offset.

Authorization: Topic READ per topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any

from kcoord.apis.access import Op, may_topic
from kcoord.apis.wiring import own_api
from kcoord.cluster.fetch_waiters import AppendWatch
from kcoord.cluster.growth_hints import GrowthHints
from kcoord.cluster.leader_epochs import NO_EPOCH, led_log
from kcoord.cluster.producer_state import ProducerStateManager
from kcoord.cluster.topic_manager import TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.record_batch import iter_batches
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext
from kcoord.storage.api import PartitionLog

PartitionResponse = dict[str, Any]

READ_COMMITTED = 1


def fetch_error(request: Any, code: ErrorCode) -> dict[str, Any]:
    """The top-level error (v7+) and, for every version, the same error on each partition."""
    return {
        "error_code": code,
        "session_id": 0,
        "responses": [
            {"topic": t.topic, "partitions": [_error(int(p.partition), code) for p in t.partitions]}
            for t in request.topics
        ],
    }


@dataclass(slots=True)
class _PartitionFetch:
    index: int
    fetch_offset: int
    max_bytes: int
    log: PartitionLog | None
    missing: ErrorCode = ErrorCode.unknown_topic_or_partition
    """The error when ``log`` is None (NOT_LEADER_OR_FOLLOWER where another node leads it)."""


@dataclass(slots=True)
class _ReadResult:
    responses: list[dict[str, Any]]
    total_bytes: int
    has_error: bool


async def handle_fetch(
    ctx: RequestContext,
    request: Any,
    *,
    topics: TopicManager,
    hints: GrowthHints,
    authorizer: Authorizer,
    producers: ProducerStateManager | None = None,
) -> dict[str, Any]:
    # 1. Whole-request checks.
    if int(request.replica_id) >= 0:
        raise KafkaError(ErrorCode.not_leader_or_follower, "kcoord has no followers to serve")
    connection_id = ctx.connection.connection_id
    denied = {t.topic for t in request.topics if not may_topic(ctx, authorizer, Op.READ, t.topic)}
    plan = [
        (
            t.topic,
            [
                _PartitionFetch(
                    int(p.partition),
                    int(p.fetch_offset),
                    int(p.partition_max_bytes),
                    *led_log(topics, t.topic, int(p.partition), getattr(p, "current_leader_epoch", NO_EPOCH)),
                )
                for p in t.partitions
            ],
        )
        for t in request.topics
        if t.topic not in denied and not hints.take(t.topic, connection_id)
    ]
    hinted = [
        {
            "topic": t.topic,
            "partitions": [
                _error(
                    int(p.partition),
                    ErrorCode.topic_authorization_failed
                    if t.topic in denied
                    else ErrorCode.not_leader_or_follower,
                )
                for p in t.partitions
            ],
        }
        for t in request.topics
        if t.topic not in {topic for topic, _ in plan}
    ]
    max_bytes = int(request.max_bytes)
    min_bytes = int(request.min_bytes)
    max_wait_s = request.max_wait.total_seconds()
    committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED

    # 2. Read what is there; answer at once when it is enough.
    result = await _read(plan, max_bytes, producers, committed=committed)
    watched = [p.log for _, parts in plan for p in parts if p.log is not None]
    if max_wait_s > 0 and result.total_bytes < min_bytes and not result.has_error and watched:
        # 3. Long poll: sleep until an append to a fetched partition or the deadline.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_s
        stable = []
        if committed and producers is not None:
            stable = [
                functools.partial(producers.watch_stable, topic, p.index)
                for topic, parts in plan
                for p in parts
                if p.log is not None
            ]
        with AppendWatch(watched, stable) as watch:
            while await watch.wait(deadline - loop.time()):
                result = await _read(plan, max_bytes, producers, committed=committed)
                if result.total_bytes >= min_bytes or result.has_error:
                    break
    return {"error_code": ErrorCode.none, "session_id": 0, "responses": hinted + result.responses}


async def _read(
    plan: list[tuple[str, list[_PartitionFetch]]],
    max_bytes: int,
    producers: ProducerStateManager | None,
    *,
    committed: bool,
) -> _ReadResult:
    """One pass over every partition of the request under the size rules of the module docstring."""
    remaining = max_bytes
    total = 0
    has_error = False
    responses: list[dict[str, Any]] = []
    for topic, parts in plan:
        answers: list[PartitionResponse] = []
        for part in parts:
            partition_log = part.log
            if partition_log is None:
                answers.append(_error(part.index, part.missing))
                has_error = True
                continue
            start = partition_log.log_start_offset
            end = partition_log.log_end_offset
            offset = part.fetch_offset
            if not start <= offset <= end:
                answers.append(_error(part.index, ErrorCode.offset_out_of_range, start))
                has_error = True
                continue
            stable = end if producers is None else producers.last_stable_offset(topic, part.index, end, start)
            readable_end = stable if committed else end
            records = b""
            limit = min(part.max_bytes, remaining)
            if offset < readable_end and (limit > 0 or total == 0):
                try:
                    records = await partition_log.read_async(offset, max(limit, 1))
                except KafkaError as exc:
                    answers.append(_error(part.index, exc.code, start))
                    has_error = True
                    continue
                if committed and readable_end < end:
                    records = _below(records, readable_end)
                if total > 0 and len(records) > limit:
                    records = b""
            aborted: list[dict[str, int]] = []
            if committed and records and producers is not None:
                aborted = _aborted_in(producers, topic, part.index, offset, readable_end, records)
            total += len(records)
            remaining -= len(records)
            answers.append(
                {
                    "partition_index": part.index,
                    "error_code": ErrorCode.none,
                    "high_watermark": end,
                    "last_stable_offset": stable,
                    "log_start_offset": start,
                    "aborted_transactions": aborted,
                    "preferred_read_replica": -1,
                    "records": records,
                }
            )
        responses.append({"topic": topic, "partitions": answers})
    return _ReadResult(responses, total, has_error)


def _below(records: bytes, bound: int) -> bytes:
    """The whole batches of ``records`` that start below ``bound``."""
    for position, header in iter_batches(records):
        if header.base_offset >= bound:
            return records[:position]
    return records


def _aborted_in(
    producers: ProducerStateManager, topic: str, partition: int, offset: int, bound: int, records: bytes
) -> list[dict[str, int]]:
    """The aborted transactions a read_committed answer carries: those overlapping [offset, LSO),
    cut to the data returned when there are several (a consumer far behind would otherwise get
    every abort up to the LSO in each answer)."""
    found = producers.aborted_between(topic, partition, offset, bound)
    if len(found) > 1:
        end = offset
        for _, header in iter_batches(records):
            end = header.next_offset
        found = [a for a in found if a.first_offset < end]
    return [{"producer_id": a.producer_id, "first_offset": a.first_offset} for a in found]


def _error(index: int, code: ErrorCode, log_start_offset: int = -1) -> PartitionResponse:
    return {
        "partition_index": index,
        "error_code": code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": log_start_offset,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


api = own_api(ApiKey.FETCH, "Fetch", 4, 12, handle_fetch, fetch_error)
