"""Every API version ApiVersions advertises, round-tripped through a real in-process server.

For each (key, version) in the registry the case of :mod:`tests.protocol.request_samples` is
encoded with kio's request schema of that version, sent over a real loopback socket to a started
:class:`kcoord.app.App`, and the answer decoded with kio's response schema of the same version:
no trailing bytes, the right correlation id and response header version, error NONE and the
API's own effect. A version registered without a case fails here rather than going untested.
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from kcoord.app import App
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import request_class, response_class
from tests.protocol.in_process import connected, legacy_header_frame, running_app
from tests.protocol.request_samples import CASES, WITHOUT_KIO_SCHEMA, Scene
from tests.support.served import served_apis, served_spec

IN_MODULE_LOOP = pytest.mark.asyncio(loop_scope="module")
"""The async tests share the module's event loop, where the module's server runs."""

ADVERTISED = [
    (spec.key, version) for spec in served_apis() for version in range(spec.min_version, spec.max_version + 1)
]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[App, int]]:
    """One App on the file store for the whole module; each case uses its own topic and group names."""
    async with running_app(tmp_path_factory.mktemp("round-trip")) as started:
        yield started


@IN_MODULE_LOOP
@pytest.mark.parametrize(
    ("api_key", "version"),
    ADVERTISED,
    ids=[f"{served_spec(k).name}-v{v}" for k, v in ADVERTISED],
)
async def test_advertised_version_round_trips(server: tuple[App, int], api_key: int, version: int) -> None:
    """The sample request of this advertised version is answered in the same version's schema, correctly."""
    case = CASES.get(api_key)
    assert case is not None, f"api key {api_key} is advertised but has no case in request_samples.CASES"
    app, port = server
    async with connected(port) as client:
        if request_class(api_key, version) is None:
            assert (api_key, version) in WITHOUT_KIO_SCHEMA, f"key {api_key} v{version} has no kio schema"
            await client.send_frame(legacy_header_frame(api_key, version, 1, b"\x00\x00\x00\x00"))
            assert await client.closed_by_server(), "a version without a schema closes the connection"
            return
        scene = Scene(
            client=client,
            version=version,
            port=port,
            node_id=app.node.node_id,
            topic=f"round-trip-{api_key}-v{version}",
            group=f"round-trip-group-{api_key}-v{version}",
        )
        if case.setup is not None:
            await case.setup(scene)
        response = await client.call(api_key, version, case.sample(scene))
        await case.check(scene, response)


def test_every_case_belongs_to_a_registered_api() -> None:
    """request_samples has no case for an API the registry does not serve (a removed API loses its case)."""
    assert set(CASES) == {spec.key for spec in served_apis()}


@IN_MODULE_LOOP
@pytest.mark.parametrize("version", [5, 127])
async def test_unsupported_api_versions_version_answers_error_35_in_v0_layout(
    server: tuple[App, int], version: int
) -> None:
    """ApiVersions at a version not served answers UNSUPPORTED_VERSION, header v0, body in the v0 layout."""
    async with connected(server[1]) as client:
        await client.send_frame(legacy_header_frame(ApiKey.API_VERSIONS, version, 77))
        frame = await client.recv_frame()
        assert await client.closed_by_server(within_s=0.2) is False, "the connection stays open for a retry"
    assert struct.unpack_from(">i", frame, 0) == (77,)
    body, size = entity_reader(response_class(ApiKey.API_VERSIONS, 0))(frame, 4)
    assert 4 + size == len(frame), "nothing after the v0 body (no header tagged fields, no throttle time)"
    assert body.error_code == ErrorCode.unsupported_version
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}
    assert ranges[ApiKey.API_VERSIONS] == (0, 4)
    assert ranges == {s.key: (s.min_version, s.max_version) for s in served_apis()}
