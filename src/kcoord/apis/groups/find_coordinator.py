"""FindCoordinator (key 10), versions 0-6.

- v0: one group key; the answer is a node.
- v1: ``key_type`` (0 group, 1 transaction), throttle time and an error message.
- v2: same layout (librdkafka's newest).
- v3: flexible.
- v4: batched: ``coordinator_keys`` in, ``coordinators[]`` out, one error per key.
- v5/v6: new error semantics only (v6: share-group keys, type 2); layout as v4.

On one node every group's coordinator is this node; its partition of ``__consumer_offsets`` is
``partition_for(group_id)``. A transactional id (key type 1) is placed the same way on
``__transaction_state``. In a cluster the coordinator is that partition's owner among the live
nodes; while it has none (a failover in progress) the answer is COORDINATOR_NOT_AVAILABLE, which
clients retry. Share coordinators (key type 2) are not served: those keys get INVALID_REQUEST, a
fatal answer, rather than a retriable one that would make a client spin.

Authorization: Group DESCRIBE per group key, else GROUP_AUTHORIZATION_FAILED; TransactionalId
DESCRIBE per transactional key, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, may, may_group
from kcoord.apis.wiring import NodeApi
from kcoord.cluster.identity import Node
from kcoord.protocol.api_keys import ApiKey
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

_GROUP_KEY = 0
_TRANSACTION_KEY = 1
_SERVED = {_GROUP_KEY: "group id", _TRANSACTION_KEY: "transactional id"}


def _answer(node: Node, key: str, key_type: int, authorized: bool, listener_name: str) -> dict[str, Any]:
    host, port = node.address_for(listener_name)
    if key_type not in _SERVED:
        error, message = ErrorCode.invalid_request, "kcoord coordinates groups and transactions only"
    elif not key:
        error, message = ErrorCode.invalid_request, f"empty {_SERVED[key_type]}"
    elif not authorized and key_type == _TRANSACTION_KEY:
        error = ErrorCode.transactional_id_authorization_failed
        message = f"TransactionalId DESCRIBE on {key!r} is not authorized."
    elif not authorized:
        error, message = ErrorCode.group_authorization_failed, f"Group DESCRIBE on {key!r} is not authorized."
    else:
        node_id = node.node_id
        if node.directory is not None:
            found = node.directory.coordinator(key_type, key)
            if found is None:
                return _error_answer(key, ErrorCode.coordinator_not_available, "no live coordinator yet")
            if found[0] != node.node_id:  # this node answers with the listener the client used
                node_id, host, port = found
        return {
            "key": key,
            "error_code": ErrorCode.none,
            "error_message": None,
            "node_id": node_id,
            "host": host,
            "port": port,
        }
    return _error_answer(key, error, message)


def _error_answer(key: str, error: ErrorCode, message: str) -> dict[str, Any]:
    return {"key": key, "error_code": error, "error_message": message, "node_id": -1, "host": "", "port": -1}


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    keys = getattr(request, "coordinator_keys", None)
    if keys is not None:
        return {
            "coordinators": [
                {"key": k, "error_code": code, "error_message": None, "node_id": -1, "host": "", "port": -1}
                for k in keys
            ]
        }
    return {"error_code": code, "error_message": None, "node_id": -1, "host": "", "port": -1}


async def handle_find_coordinator(
    ctx: RequestContext, request: Any, *, node: Node, authorizer: Authorizer
) -> dict[str, Any]:
    key_type = int(getattr(request, "key_type", _GROUP_KEY))

    def answer(key: str) -> dict[str, Any]:
        if key_type == _TRANSACTION_KEY:
            authorized = may(ctx, authorizer, Op.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key)
        else:
            authorized = may_group(ctx, authorizer, Op.DESCRIBE, key)
        return _answer(node, key, key_type, authorized, ctx.connection.listener_name)

    if ctx.api_version >= 4:
        return {"coordinators": [answer(key) for key in request.coordinator_keys]}
    return answer(request.key)


api = NodeApi(ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 6, handle_find_coordinator, _error_response)
