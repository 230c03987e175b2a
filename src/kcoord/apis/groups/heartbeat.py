"""Heartbeat (key 12), versions 0-4.

- v1: throttle time.
- v3: ``group_instance_id``.
- v4: flexible.

A heartbeat moves the member's session deadline (no timer is created or cancelled) and tells a
member whose group is rebalancing to rejoin (REBALANCE_IN_PROGRESS). While the group's partition
is still loading, Kafka answers NONE rather than an error, so members do not rejoin needlessly.

Authorization: Group READ, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import functools
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, require_group
from kcoord.apis.groups.common import MemberWatch
from kcoord.apis.groups.heartbeat_wire import decode_heartbeat
from kcoord.coordinator.classic.messages import HeartbeatRequest
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, build, response_class
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.protocol.repeated_requests import RepeatedRequests
from kcoord.runtime.group_service import GroupService
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code}


def api(groups: GroupService, members: MemberWatch, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_heartbeat, groups=groups, members=members, authorizer=authorizer)
    decoder = RepeatedRequests(ApiKey.HEARTBEAT, decode_heartbeat)  # a member's beats repeat byte for byte
    return ApiSpec(ApiKey.HEARTBEAT, "Heartbeat", 0, 4, handler, _error_response, decoder)


async def handle_heartbeat(
    ctx: RequestContext, request: Any, *, groups: GroupService, members: MemberWatch, authorizer: Authorizer
) -> Any:
    require_group(ctx, authorizer, Op.READ, request.group_id)
    if type(request) is HeartbeatRequest:  # from the hand-written reader (heartbeat_wire)
        beat = request
    else:
        beat = HeartbeatRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
        )
    try:
        error = groups.heartbeat(beat, ctx.connection.connection_id)
    except KafkaError as exc:
        if exc.code == ErrorCode.coordinator_load_in_progress:
            return _encoded(ctx.api_version, ErrorCode.none)
        raise
    if error is ErrorCode.none or error is ErrorCode.rebalance_in_progress:
        members.watch(ctx.connection, beat.group_id, beat.member_id)
    return _encoded(ctx.header.api_version, error)


_ENCODED: dict[tuple[int, ErrorCode], EncodedResponse] = {}


def _encoded(api_version: int, error: ErrorCode) -> EncodedResponse:
    """A heartbeat answer is only an error code: each (version, code) is encoded once.

    Heartbeats are the hot path of every stable group (a profile put the generic encoding at a
    fifth of a heartbeat's cost), so their answers are reused bytes.
    """
    answer = _ENCODED.get((api_version, error))
    if answer is None:
        cls = response_class(ApiKey.HEARTBEAT, api_version)
        answer = _ENCODED[(api_version, error)] = EncodedResponse.of(build(cls, {"error_code": error}))
    return answer
