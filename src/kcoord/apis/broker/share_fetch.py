"""ShareFetch (key 78), versions 1-2: a share group member's fetch, with its acknowledgements.

- v0 was Kafka 4.0's early-access version and is not served.
- v1: share sessions (``share_session_epoch``: 0 opens, -1 closes, else the next epoch), the topics
  to add and forget, ``max_records`` and ``batch_size``; acknowledgements of earlier deliveries ride
  on the fetch; the answer carries the records and, per partition, the acquired offset runs with
  their delivery count, plus the acquisition lock timeout.
- v2: ``share_acquire_mode`` (KIP-1206; kcoord acquires in the batch-optimised mode either way) and
  KIP-1222's renew acknowledgement (type 4): it extends the record's acquisition lock, writes
  nothing and is answered at once. A fetch with ``is_renew_ack`` only acknowledges: it must ask for
  nothing (``max_wait_ms``, ``min_bytes``, ``max_bytes`` and ``max_records`` all 0, else
  INVALID_REQUEST, as Kafka) and acquires nothing. In a v1 request type 4 is INVALID_REQUEST.

What kcoord answers:

1. The session first (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_NOT_FOUND,
   SHARE_SESSION_LIMIT_REACHED as top-level errors), then the acknowledgements, each partition's
   answered once durable (``acknowledge_error_code``); the final fetch (-1) only acknowledges and
   releases what the member still holds.
2. Every partition of the session is fetched: whole batches from its first Available offset, up to
   ``max_bytes`` and ``max_records`` over the request, under locks of
   ``group.share.record.lock.duration.ms``.
3. A session lives as long as the connection that opened it: when it closes, the member's acquired
   records are released (Kafka 4.1+).
4. Long poll: with nothing acquired and no partition in error, the fetch waits up to ``max_wait_ms``
   for an append to one of its partitions or a record that becomes available again.

Authorization, as Kafka 4.2: Group READ on the share group (else GROUP_AUTHORIZATION_FAILED for the
whole request), Topic READ per topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kcoord.apis.broker.share_partitions_common import (
    SharePartitionsApi,
    SharePartitionsEdge,
    acknowledgements,
    current_leader,
    error_response,
)
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.runtime.share_partition_leader import SharePartitionLeader, TopicIdPartition
from kcoord.server.context import RequestContext
from kcoord.storage.api import PartitionLog


async def handle_share_fetch(
    ctx: RequestContext, request: Any, *, edge: SharePartitionsEdge
) -> dict[str, Any]:
    leader = edge.leader
    group_id, member_id = edge.member(ctx, request)
    renewing = ctx.api_version >= 2 and bool(request.is_renew_ack)
    if renewing and _asks_for_records(request):
        raise KafkaError(ErrorCode.invalid_request, "a renewing ShareFetch must ask for no records")
    answers: dict[TopicIdPartition, dict[str, Any]] = {}

    # 1. Which partitions: refused ones are answered, the others join the session.
    added: list[TopicIdPartition] = []
    for topic in request.topics:
        refused = edge.readable(ctx, topic.topic_id)
        for p in topic.partitions:
            tp = (topic.topic_id, int(p.partition_index))
            if refused != ErrorCode.none:
                answers[tp] = _answer(tp[1], edge.node_id, error=refused)
            else:
                added.append(tp)
    forgotten = [(t.topic_id, int(p)) for t in request.forgotten_topics_data for p in t.partitions]
    epoch = int(request.share_session_epoch)
    session = leader.sessions.fetch(group_id, member_id, epoch, added, forgotten)
    if epoch == 0 and session is not None:
        opened = session
        ctx.connection.on_close(lambda: leader.connection_closed(group_id, member_id, opened))

    # 2. Acknowledgements, each answered once durable.
    for topic in request.topics:
        for p in topic.partitions:
            tp = (topic.topic_id, int(p.partition_index))
            if tp in answers or not p.acknowledgement_batches:
                continue
            try:
                code = await leader.acknowledge(group_id, member_id, tp, acknowledgements(p, ctx.api_version))
            except KafkaError as exc:
                code = exc.code
            answers[tp] = _answer(tp[1], edge.node_id, ack_error=code)
    if session is None:
        leader.release_member(group_id, member_id)
        return edge.response(answers)
    if renewing:
        return edge.response(answers)

    # 3. Fetch every partition of the session; wait when nothing was acquired.
    fetched = sorted(session.partitions, key=lambda tp: (str(tp[0]), tp[1]))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    logs = [log for tp in fetched if (log := _log_or_none(leader, tp)) is not None]
    with leader.watch(logs) as woken:
        while True:
            woken.clear()
            got = await _fetch(edge, group_id, member_id, fetched, request, answers)
            failed = any(a["error_code"] != ErrorCode.none for a in answers.values())
            remaining = deadline - loop.time()
            if got or failed or remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    await woken.wait()
            except TimeoutError:
                break
    return edge.response(answers)


async def _fetch(
    edge: SharePartitionsEdge,
    group_id: str,
    member_id: str,
    fetched: list[TopicIdPartition],
    request: Any,
    answers: dict[TopicIdPartition, dict[str, Any]],
) -> bool:
    """One pass over the session's partitions; True when anything was acquired."""
    leader = edge.leader
    records_left = (
        int(request.max_records) if int(request.max_records) > 0 else leader.config.partition_max_record_locks
    )
    bytes_left = max(int(request.max_bytes), 1)
    got = False
    for tp in fetched:
        answer = answers.get(tp) or _answer(tp[1], edge.node_id)
        answers[tp] = answer
        if answer["error_code"] != ErrorCode.none or records_left <= 0 or bytes_left <= 0:
            continue
        try:
            await leader.ensure_loaded(group_id, tp)
            data, acquired = await leader.acquire(group_id, member_id, tp, records_left, bytes_left)
        except KafkaError as exc:
            answer["error_code"] = exc.code
            answer["error_message"] = exc.message
            continue
        if acquired:
            got = True
            answer["records"] = data
            answer["acquired_records"] = [
                {
                    "first_offset": a.first_offset,
                    "last_offset": a.last_offset,
                    "delivery_count": a.delivery_count,
                }
                for a in acquired
            ]
            records_left -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
            bytes_left -= len(data)
    return got


def _asks_for_records(request: Any) -> bool:
    return bool(
        request.max_wait.total_seconds() or request.min_bytes or request.max_bytes or request.max_records
    )


def _log_or_none(leader: SharePartitionLeader, tp: TopicIdPartition) -> PartitionLog | None:
    try:
        return leader.log_of(tp)
    except KafkaError:
        return None


def _answer(
    partition: int, node_id: int, *, error: ErrorCode = ErrorCode.none, ack_error: ErrorCode = ErrorCode.none
) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": error,
        "error_message": None,
        "acknowledge_error_code": ack_error,
        "acknowledge_error_message": None,
        "current_leader": current_leader(node_id),
        "records": b"",
        "acquired_records": [],
    }


api = SharePartitionsApi(ApiKey.SHARE_FETCH, "ShareFetch", 1, 2, handle_share_fetch, error_response)
