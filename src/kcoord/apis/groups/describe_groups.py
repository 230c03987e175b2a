"""DescribeGroups (key 15), versions 0-5.

- v1: throttle time.
- v3: ``include_authorized_operations``: the group's bit set of READ, DESCRIBE, DELETE when asked.
- v4: ``group_instance_id`` per member.
- v5: flexible.

An unknown group is described as state "Dead" with no error (v6, which answers
GROUP_ID_NOT_FOUND, is not advertised). Member metadata and assignments are shown only while the
group is Stable, as Kafka does.

Authorization: Group DESCRIBE per group, else GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.access import Op, authorized_operations, may_group
from kcoord.apis.groups.common import GroupApi
from kcoord.coordinator.classic.messages import DescribedGroup
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import KafkaError
from kcoord.runtime.group_service import GroupService
from kcoord.security.acl import ResourceType
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

_NOT_REQUESTED = -2147483648


def _group(group: DescribedGroup, operations: int) -> dict[str, Any]:
    return {
        "error_code": group.error_code,
        "group_id": group.group_id,
        "group_state": group.state,
        "protocol_type": group.protocol_type,
        "protocol_data": group.protocol_data,
        "authorized_operations": operations,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata,
                "member_assignment": m.assignment,
            }
            for m in group.members
        ],
    }


def _failed(group_id: str, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": _NOT_REQUESTED,
    }


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"groups": [_failed(g, code) for g in request.groups]}


async def handle_describe_groups(
    ctx: RequestContext, request: Any, *, groups: GroupService, authorizer: Authorizer
) -> dict[str, Any]:
    asked = bool(getattr(request, "include_authorized_operations", False))
    described_groups = []
    for group_id in request.groups:
        if not group_id:
            described_groups.append(_failed(group_id, ErrorCode.invalid_group_id))
            continue
        if not may_group(ctx, authorizer, Op.DESCRIBE, group_id):
            described_groups.append(_failed(group_id, ErrorCode.group_authorization_failed))
            continue
        try:
            described = groups.describe_group(group_id, ctx.api_version)
        except KafkaError as exc:
            described_groups.append(_failed(group_id, exc.code))
            continue
        operations = authorized_operations(ctx, authorizer, ResourceType.GROUP, group_id, asked=asked)
        described_groups.append(_group(described, operations))
    return {"groups": described_groups}


api = GroupApi(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 5, handle_describe_groups, _error_response)
