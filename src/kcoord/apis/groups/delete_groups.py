"""DeleteGroups (key 42), versions 0-2.

- v1: no change to the layout.
- v2: flexible.

Per group: GROUP_ID_NOT_FOUND when it does not exist, NON_EMPTY_GROUP while it has members;
otherwise its offsets and then the group itself are tombstoned in the offsets log.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.apis.groups.common import coordinator
from kcoord.coordinator.classic.messages import DeleteGroupResult
from kcoord.coordinator.result import CoordinatorResult
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import REGISTRY
from kcoord.server.context import RequestContext


def _error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"results": [{"group_id": g, "error_code": code} for g in request.groups_names]}


def _delete(group_ids: list[str], shard: Any, sink: Any, now_ms: int) -> CoordinatorResult:
    result: CoordinatorResult = shard.delete_groups(group_ids, sink, now_ms)
    return result


@REGISTRY.api(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2, error_response=_error_response)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> dict[str, Any]:
    service = coordinator(ctx)
    by_partition: dict[int, list[str]] = defaultdict(list)
    results: dict[str, ErrorCode] = {}
    for group_id in request.groups_names:
        if not group_id:
            results[group_id] = ErrorCode.invalid_group_id
        else:
            by_partition[service.partition_for(group_id)].append(group_id)
    for group_ids in by_partition.values():
        try:
            answers: list[DeleteGroupResult] = await service.write(
                group_ids[0], functools.partial(_delete, group_ids)
            )
        except KafkaError as exc:
            results.update(dict.fromkeys(group_ids, exc.code))
            continue
        results.update({a.group_id: a.error_code for a in answers})
    return {"results": [{"group_id": g, "error_code": results[g]} for g in request.groups_names]}
