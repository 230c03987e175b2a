"""DescribeAcls (key 29), versions 1-3 (v0 is gone from Kafka 4 and from the codec).

- v1: ``pattern_type_filter`` (ANY, MATCH, LITERAL, PREFIXED; KIP-290).
- v2: flexible.  v3: USER resources may be named.

Needs Cluster DESCRIBE and a configured authorizer. The matching bindings come back grouped by
resource pattern, as Kafka answers.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.broker.acl_wire import AclApi, acl_authorizer, filter_from_wire
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.security.acl import AclBinding
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

__all__ = ["handle_describe_acls"]


def _answer(code: ErrorCode, message: str | None, resources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": message, "resources": resources}


def describe_acls_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return _answer(code, None, [])


def _grouped(bindings: list[AclBinding]) -> list[dict[str, Any]]:
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for b in bindings:
        key = (b.resource_type.value, b.resource_name, b.pattern_type.value)
        resources.setdefault(key, []).append(
            {
                "principal": b.principal,
                "host": b.host,
                "operation": b.operation,
                "permission_type": b.permission,
            }
        )
    return [
        {"resource_type": kind, "resource_name": name, "pattern_type": pattern, "acls": acls}
        for (kind, name, pattern), acls in resources.items()
    ]


async def handle_describe_acls(
    ctx: RequestContext, request: Any, *, authorizer: Authorizer
) -> dict[str, Any]:
    try:
        acls = acl_authorizer(ctx, authorizer, Op.DESCRIBE)
        acl_filter = filter_from_wire(request)
    except KafkaError as exc:
        return _answer(exc.code, exc.message, [])
    return _answer(ErrorCode.none, None, _grouped(acls.describe(acl_filter)))


api = AclApi(ApiKey.DESCRIBE_ACLS, "DescribeAcls", 1, 3, handle_describe_acls, describe_acls_error_response)
