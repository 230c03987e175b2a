"""TxnOffsetCommit (key 28), versions 0-4: a consumer group's offsets committed inside a transaction.

- v0: transactional id, group id, producer id and epoch; topics of (partition, offset, metadata).
- v1: the same (the broker answers after the offsets are written, as it always does here).
- v2: ``committed_leader_epoch`` per partition.
- v3: KIP-447: ``generation_id``, ``member_id`` and ``group_instance_id``, checked against the
  group (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); flexible.
- v4: the same as v3 (the client may get TRANSACTION_ABORTABLE; kcoord never answers it).
- v5 is not served: it goes with KIP-890 part 2 (``transaction.version`` 2, where the group
  coordinator adds itself to the transaction), which kcoord does not advertise; Kafka's clients
  stop at v4 without it.

The offsets are written to the group's ``__consumer_offsets`` partition as a transactional batch
of the producer and stay pending (invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT to a
``require_stable`` fetch) until the transaction coordinator writes the producer's marker there
(:meth:`~kcoord.runtime.service.CoordinatorService.write_end_marker`). The checks inside the shard
are :mod:`kcoord.coordinator.txn_offset_commit`'s.

Authorization, in Kafka's order: TransactionalId WRITE (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for every partition), Group READ (else GROUP_AUTHORIZATION_FAILED), then Topic READ per topic
(TOPIC_AUTHORIZATION_FAILED for its partitions, the others committed).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may, require_named_group
from kcoord.apis.groups.common import GroupApi
from kcoord.apis.groups.offset_commit import commit_error_response, commit_readable, core_topics
from kcoord.coordinator.offsets import OffsetCommitResponse
from kcoord.coordinator.txn_offset_commit import TxnOffsetCommitRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_service import GroupService
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

MIN_VERSION = 0
MAX_VERSION = 4


def to_core(request: Any) -> TxnOffsetCommitRequest:
    """The wire request (any version; fields a version lacks take their defaults) as the core's."""
    return TxnOffsetCommitRequest(
        transactional_id=request.transactional_id,
        group_id=request.group_id,
        producer_id=int(request.producer_id),
        producer_epoch=int(request.producer_epoch),
        generation_id=int(getattr(request, "generation_id", -1)),
        member_id=getattr(request, "member_id", ""),
        group_instance_id=getattr(request, "group_instance_id", None),
        topics=core_topics(request),
    )


async def handle_txn_offset_commit(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> OffsetCommitResponse:
    if not may(ctx, authorizer, Op.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        raise KafkaError(ErrorCode.transactional_id_authorization_failed)
    require_named_group(ctx, authorizer, Op.READ, request.group_id)
    commit = to_core(request)
    if not authorizer.enabled:
        return await groups.commit_transactional_offsets(commit)
    return await commit_readable(ctx, authorizer, commit, groups.commit_transactional_offsets)


api = GroupApi(
    ApiKey.TXN_OFFSET_COMMIT,
    "TxnOffsetCommit",
    MIN_VERSION,
    MAX_VERSION,
    handle_txn_offset_commit,
    commit_error_response,
)
