"""DeleteAcls (key 31), versions 1-3 (v0 is gone from Kafka 4 and from the codec).

- v1: ``pattern_type_filter`` per filter (KIP-290).
- v2: flexible.  v3: USER resources may be named.

Needs Cluster ALTER and a configured authorizer. Every binding any valid filter matches is
removed in one persisted change; each filter's result lists the bindings it matched.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.broker.acl_wire import AclApi, acl_authorizer, filter_from_wire
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import AclBinding, AclBindingFilter
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_delete_acls"]


def _filter_result(code: ErrorCode, message: str | None, matched: list[AclBinding]) -> dict[str, Any]:
    return {
        "error_code": code,
        "error_message": message,
        "matching_acls": [
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "resource_type": b.resource_type,
                "resource_name": b.resource_name,
                "pattern_type": b.pattern_type,
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation,
                "permission_type": b.permission,
            }
            for b in matched
        ],
    }


def delete_acls_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "filter_results": [_filter_result(code, None, []) for _ in request.filters or ()],
    }


async def handle_delete_acls(ctx: RequestContext, request: Any, *, authorizer: Authorizer) -> dict[str, Any]:
    filters = request.filters or ()
    try:
        acls = acl_authorizer(ctx, authorizer, Op.ALTER)
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "filter_results": [_filter_result(exc.code, exc.message, []) for _ in filters],
        }
    parsed: list[AclBindingFilter | KafkaError] = []
    for item in filters:
        try:
            parsed.append(filter_from_wire(item))
        except KafkaError as exc:
            parsed.append(exc)
    valid = [f for f in parsed if isinstance(f, AclBindingFilter)]
    matched = iter(await acls.delete(valid))
    results = [
        _filter_result(p.code, p.message, [])
        if isinstance(p, KafkaError)
        else _filter_result(ErrorCode.none, None, next(matched))
        for p in parsed
    ]
    return {"throttle_time": 0, "filter_results": results}


api = AclApi(ApiKey.DELETE_ACLS, "DeleteAcls", 1, 3, handle_delete_acls, delete_acls_error_response)
