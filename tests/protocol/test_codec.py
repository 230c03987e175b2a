"""The codec's version-neutral ``build`` and the router's error forms, for every advertised version.

The error-form test swaps each API's handler for one that fails, keeps the API's own
``error_response``, and sends the sample request of every advertised version through the real
:class:`Router`: the client must get that version's response carrying the error, never a closed
connection because the error form does not fit the version's schema.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, build, encode_response, request_class, response_class
from kcoord.protocol.errors import KafkaError
from kcoord.protocol.registry import ApiRegistry
from kcoord.server.context import ConnectionInfo, RequestContext
from kcoord.server.router import Router
from tests.protocol.in_process import decode_response, encode_request
from tests.protocol.request_samples import CASES, Scene
from tests.support.served import served_apis, served_spec

WITH_SCHEMA = [
    (spec.key, version)
    for spec in served_apis()
    for version in range(spec.min_version, spec.max_version + 1)
    if request_class(spec.key, version) is not None
]


def test_build_drops_fields_the_version_lacks() -> None:
    """A mapping in the newest field names builds an older version; fields that version lacks are dropped."""
    request = build(
        request_class(ApiKey.LEAVE_GROUP, 0),  # type: ignore[arg-type]
        {"group_id": "g", "member_id": "m", "members": [{"member_id": "m"}]},
    )
    assert (request.group_id, request.member_id) == ("g", "m")
    assert not hasattr(request, "members")


def test_build_names_a_missing_required_field() -> None:
    """A required field missing from the mapping is a KeyError naming it, not a silent default."""
    with pytest.raises(KeyError, match="group_id"):
        build(request_class(ApiKey.HEARTBEAT, 0), {"generation_id": 1, "member_id": "m"})  # type: ignore[arg-type]


def test_build_keeps_the_schema_defaults_of_durations() -> None:
    """Omitted durations take the schema's default (-1 ms, 60 s), not zero; zero only where there is none."""
    join = build(
        request_class(ApiKey.JOIN_GROUP, 1),  # type: ignore[arg-type]
        {
            "group_id": "g",
            "session_timeout": 10_000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [],
        },
    )
    assert join.rebalance_timeout == datetime.timedelta(milliseconds=-1)
    assert join.session_timeout == datetime.timedelta(seconds=10)
    commit = build(
        request_class(ApiKey.OFFSET_COMMIT, 2),  # type: ignore[arg-type]
        {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": []},
    )
    assert commit.retention_time == datetime.timedelta(milliseconds=-1)
    topics = build(request_class(ApiKey.CREATE_TOPICS, 4), {"topics": []})  # type: ignore[arg-type]
    assert topics.timeout == datetime.timedelta(seconds=60)
    heartbeat = build(response_class(ApiKey.HEARTBEAT, 1), {})
    assert (heartbeat.error_code, heartbeat.throttle_time) == (ErrorCode.none, datetime.timedelta(0))


def test_build_accepts_objects_with_the_field_names() -> None:
    """The core's dataclasses build directly: attributes are read by field name, nested ones too."""

    @dataclasses.dataclass
    class Member:
        member_id: str
        group_instance_id: str | None
        error_code: ErrorCode

    @dataclasses.dataclass
    class Left:
        error_code: ErrorCode
        members: tuple[Member, ...]

    response = build(
        response_class(ApiKey.LEAVE_GROUP, 4),
        Left(ErrorCode.none, (Member("m", None, ErrorCode.unknown_member_id),)),
    )
    assert [(m.member_id, m.error_code) for m in response.members] == [("m", ErrorCode.unknown_member_id)]


def _failing_registry(error: Exception) -> ApiRegistry:
    """Every registered API, same versions and error forms, with a handler that raises ``error``."""

    async def fail(ctx: Any, request: Any) -> Any:
        raise error

    return ApiRegistry(dataclasses.replace(spec, handler=fail) for spec in served_apis())


def _error_codes(entity: Any) -> list[ErrorCode]:
    """Every error code anywhere in a decoded response."""
    found: list[ErrorCode] = []
    if isinstance(entity, tuple):
        for item in entity:
            found += _error_codes(item)
    elif dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if isinstance(value, ErrorCode):
                found.append(value)
            else:
                found += _error_codes(value)
    return found


async def _through_router(registry: ApiRegistry, api_key: int, version: int) -> Any:
    scene = Scene(client=None, version=version, port=9092, node_id=0, member_id="m-1", generation=1)  # type: ignore[arg-type]
    frame = encode_request(api_key, version, CASES[api_key].sample(scene), 5, "codec-test")[4:]
    router = Router(registry)
    answer = await router.handle(frame, ConnectionInfo(1, "127.0.0.1", 1))
    assert answer is not None
    return decode_response(api_key, version, answer[4:], 5)


@pytest.mark.parametrize(
    ("api_key", "version"),
    WITH_SCHEMA,
    ids=[f"{served_spec(k).name}-v{v}" for k, v in WITH_SCHEMA],
)
async def test_error_form_of_every_version_reaches_the_client(api_key: int, version: int) -> None:
    """A handler's KafkaError is answered in this version's schema, the code where the version puts it."""
    code = ErrorCode.coordinator_load_in_progress
    response = await _through_router(_failing_registry(KafkaError(code)), api_key, version)
    codes = _error_codes(response)
    assert codes and set(codes) == {code}


async def test_unexpected_exception_is_answered_as_unknown_server_error() -> None:
    """A bug in a handler is logged and answered UNKNOWN_SERVER_ERROR, the connection kept."""
    response = await _through_router(_failing_registry(RuntimeError("bug")), ApiKey.HEARTBEAT, 4)
    assert response.error_code == ErrorCode.unknown_server_error


def test_request_context_names_the_version() -> None:
    """The context handed to handlers carries the request's version and client id (None reads as "")."""
    from kcoord.protocol.codec import RequestHeader

    ctx = RequestContext(RequestHeader(12, 3, 9, None), ConnectionInfo(1, "127.0.0.1", 1))
    assert (ctx.api_version, ctx.client_id, ctx.client_host) == (3, "", "127.0.0.1")


@pytest.mark.parametrize(
    ("api_key", "body"),
    [
        (ApiKey.HEARTBEAT, {"error_code": ErrorCode.rebalance_in_progress}),
        (ApiKey.API_VERSIONS, {"error_code": ErrorCode.none, "api_keys": []}),
        (
            ApiKey.OFFSET_COMMIT,
            {"topics": [{"name": "t", "topic_id": uuid.UUID(int=9), "partitions": [{"partition_index": 0}]}]},
        ),
    ],
)
def test_an_encoded_answer_frames_as_the_response_would_be_encoded(
    api_key: int, body: dict[str, Any]
) -> None:
    """An answer encoded once gives, for any correlation id, the bytes encode_response gives, in every
    version (flexible response headers included, ApiVersions' always v0)."""
    versions = [v for v in range(20) if request_class(api_key, v) is not None]
    for version in versions:
        response = build(response_class(api_key, version), body)
        encoded = EncodedResponse.of(response)
        for correlation_id in (0, 7, -(2**31), 2**31 - 1):
            assert encoded.frame(correlation_id) == encode_response(correlation_id, response)
