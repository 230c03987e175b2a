"""CreateAcls (key 30), versions 1-3 (v0 is gone from Kafka 4 and from the codec).

- v1: ``resource_pattern_type`` (LITERAL or PREFIXED; KIP-290).
- v2: flexible.  v3: USER resources may be named (kcoord's authorizer does not use them).

Needs Cluster ALTER (CLUSTER_AUTHORIZATION_FAILED per creation otherwise) and a configured
authorizer (SECURITY_DISABLED otherwise). An invalid creation gets INVALID_REQUEST alone; the
valid ones are persisted together and apply from the next request on.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.broker.acl_wire import AclApi, acl_authorizer, binding_from_wire
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import AclBinding
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_create_acls"]


def _result(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


def create_acls_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "results": [_result(code) for _ in request.creations or ()]}


async def handle_create_acls(ctx: RequestContext, request: Any, *, authorizer: Authorizer) -> dict[str, Any]:
    creations = request.creations or ()
    try:
        acls = acl_authorizer(ctx, authorizer, Op.ALTER)
    except KafkaError as exc:
        return {"throttle_time": 0, "results": [_result(exc.code, exc.message) for _ in creations]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for creation in creations:
        try:
            valid.append(binding_from_wire(creation))
            results.append(_result(ErrorCode.none))
        except KafkaError as exc:
            results.append(_result(exc.code, exc.message))
    if valid:
        await acls.create(valid)
    return {"throttle_time": 0, "results": results}


api = AclApi(ApiKey.CREATE_ACLS, "CreateAcls", 1, 3, handle_create_acls, create_acls_error_response)
