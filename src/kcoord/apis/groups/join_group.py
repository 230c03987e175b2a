"""JoinGroup (key 11), versions 0-9.

- v0: no rebalance timeout (the session timeout stands in for it, as in Kafka).
- v1: ``rebalance_timeout_ms``.
- v2: throttle time.
- v4: a new dynamic member is told MEMBER_ID_REQUIRED and must rejoin with the id it was given.
- v5: ``group_instance_id`` (static membership, KIP-345).
- v6: flexible.
- v7: ``protocol_type`` in the response; a null protocol name is null (before v7 it is ``""``).
- v8: ``reason``.
- v9: ``skip_assignment`` for a static leader whose group need not rebalance.

A JoinGroup usually waits: the response comes when the join phase completes (every known member
has rejoined, or the rebalance timeout passed). The wait happens in the coordinator, never on the
connection, which keeps reading (a member's Heartbeat may share it).

Authorization: Group READ, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.groups.common import MemberWatch, millis
from kcoord.apis.wiring import own_api
from kcoord.coordinator.classic.messages import JoinGroupRequest, JoinGroupResponse
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "generation_id": -1,
        "protocol_name": _wire_protocol_name(None, int(type(request).__version__)),
        "leader": "",
        "member_id": request.member_id,
        "members": [],
    }


def to_core(ctx: RequestContext, request: Any) -> JoinGroupRequest:
    session_timeout = millis(request.session_timeout)
    return JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        protocol_type=request.protocol_type,
        protocols=tuple((p.name, bytes(p.metadata)) for p in request.protocols),
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=millis(getattr(request, "rebalance_timeout", None), session_timeout),
        reason=getattr(request, "reason", None),
        client_id=ctx.client_id,
        client_host=ctx.client_host,
        api_version=ctx.api_version,
    )


def _wire_protocol_name(protocol_name: str | None, api_version: int) -> str | None:
    """Before v7 the protocol name is not nullable: "no protocol" is sent as ``""``."""
    if protocol_name is None and api_version < 7:
        return ""
    return protocol_name


def to_wire(response: JoinGroupResponse, api_version: int) -> dict[str, Any]:
    protocol_name = _wire_protocol_name(response.protocol_name, api_version)
    return {
        "error_code": response.error_code,
        "generation_id": response.generation_id,
        "protocol_type": response.protocol_type,
        "protocol_name": protocol_name,
        "leader": response.leader,
        "skip_assignment": response.skip_assignment,
        "member_id": response.member_id,
        "members": response.members,
    }


async def handle_join_group(
    ctx: RequestContext, request: Any, *, groups: GroupService, members: MemberWatch, authorizer: Authorizer
) -> dict[str, Any]:
    require_group(ctx, authorizer, Op.READ, request.group_id)
    join = to_core(ctx, request)
    response = await groups.join_group(join, ctx.connection.connection_id)
    if response.error_code == ErrorCode.none:
        members.watch(ctx.connection, join.group_id, response.member_id)
    return to_wire(response, ctx.api_version)


api = own_api(ApiKey.JOIN_GROUP, "JoinGroup", 0, 9, handle_join_group, _error_response)
