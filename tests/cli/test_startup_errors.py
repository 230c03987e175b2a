"""``kcoord serve`` start-up mistakes end in one line and an exit code, and leave the data clean."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.file_store import CLEAN_SHUTDOWN_MARKER
from tests.support.cluster_nodes import commit_error, create_topic
from tests.support.data_dir import listing
from tests.support.raw_client import RawClient
from tests.support.server import KcoordProcess


def kcoord(*args: str) -> subprocess.CompletedProcess[str]:
    """``kcoord ARGS`` with no KCOORD_* variables of the test run (they would be read as settings)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
    return subprocess.run(
        [sys.executable, "-m", "kcoord", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def serve(
    data_dir: Path, listen: str = "127.0.0.1:0", metrics: str = "127.0.0.1:0", *extra: str
) -> subprocess.CompletedProcess[str]:
    return kcoord(
        "serve", "--data-dir", str(data_dir), "--listen", listen, "--metrics-listen", metrics, *extra
    )


def last_line(stderr: str) -> str:
    """The one human line after the JSON log lines."""
    return [line for line in stderr.splitlines() if not line.startswith("{")][-1]


def no_traceback(stderr: str) -> bool:
    return "Traceback" not in stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def used_data_dir(tmp_path: Path) -> Path:
    """A data directory a server used and stopped cleanly: identity, a topic, committed offsets."""
    server = KcoordProcess(tmp_path / "used").start()
    try:
        create_topic(server, "kept", 1)
        with RawClient(server.host, server.port) as client:
            assert commit_error(client, "g", "kept", 7) == ErrorCode.none
    finally:
        assert server.terminate() == 0
    return tmp_path / "used"


@pytest.fixture(params=["fresh", "used"])
def data_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """An empty new directory, and one a server used and stopped cleanly."""
    if request.param == "used":
        return Path(request.getfixturevalue("used_data_dir"))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    return fresh


def test_kafka_port_in_use_exits_4_and_leaves_the_directory_as_it_was(data_dir: Path, busy_port: int) -> None:
    """A busy Kafka port: exit 4 naming the address and flag, and not one byte of the data
    directory read for writing or written (no lock file, no identity, no offsets partitions)."""
    before = listing(data_dir)
    result = serve(data_dir, f"127.0.0.1:{busy_port}")
    assert result.returncode == 4 and no_traceback(result.stderr)
    assert last_line(result.stderr) == (
        f"kcoord: cannot listen on 127.0.0.1:{busy_port} (listeners, --listen): address already in use"
    )
    assert listing(data_dir) == before


def test_metrics_port_in_use_exits_4_and_leaves_the_directory_as_it_was(
    data_dir: Path, busy_port: int
) -> None:
    """A busy metrics port: exit 4 naming kcoord.metrics.listen, the data directory unchanged."""
    before = listing(data_dir)
    result = serve(data_dir, "127.0.0.1:0", f"127.0.0.1:{busy_port}")
    assert result.returncode == 4 and no_traceback(result.stderr)
    assert "(kcoord.metrics.listen, --metrics-listen): address already in use" in last_line(result.stderr)
    assert listing(data_dir) == before


def test_a_refused_start_on_a_new_directory_leaves_no_directory(tmp_path: Path, busy_port: int) -> None:
    """A data directory that does not exist yet is made only once the addresses are bound: a busy
    port leaves nothing behind."""
    result = serve(tmp_path / "new" / "data", f"127.0.0.1:{busy_port}")
    assert result.returncode == 4 and no_traceback(result.stderr)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("num.partitions=abc", "kcoord: bad setting: num.partitions: bad value 'abc'"),
        (
            "advertised.listeners=NOPE://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
            "kcoord: bad setting: advertised.listeners: no listener named NOPE",
        ),
    ],
    ids=["parsed", "checked-against-the-listeners"],
)
def test_a_bad_setting_exits_2_and_leaves_the_directory_as_it_was(
    data_dir: Path, flag: str, message: str
) -> None:
    """A setting refused when read, or only once the listeners are known, stops the start with exit 2
    before the data directory is touched."""
    before = listing(data_dir)
    result = serve(data_dir, "127.0.0.1:0", "127.0.0.1:0", "--set", flag)
    assert result.returncode == 2 and no_traceback(result.stderr), result.stderr
    assert last_line(result.stderr).startswith(message)
    assert listing(data_dir) == before


def test_a_clean_stop_survives_a_refused_start(used_data_dir: Path, busy_port: int) -> None:
    """A start refused for a busy port leaves the clean-shutdown marker, so the next start is clean."""
    assert (used_data_dir / CLEAN_SHUTDOWN_MARKER).exists()
    assert serve(used_data_dir, f"127.0.0.1:{busy_port}").returncode == 4
    server = KcoordProcess(used_data_dir).start()
    try:
        assert server.events("log_store.opened")[0]["clean_shutdown"] is True
    finally:
        assert server.terminate() == 0


def test_data_dir_under_a_file_exits_3(tmp_path: Path) -> None:
    """A data directory whose parent is a file is refused before anything starts."""
    (tmp_path / "plain").write_text("x")
    result = serve(tmp_path / "plain" / "data")
    assert result.returncode == 3 and no_traceback(result.stderr)
    assert (
        result.stderr.strip()
        == f"kcoord: data directory {tmp_path}/plain/data cannot be created: a parent is a file"
    )


def test_data_dir_that_is_a_file_exits_3(tmp_path: Path) -> None:
    """A data directory that is a file is refused with exit 3."""
    (tmp_path / "plain").write_text("x")
    result = serve(tmp_path / "plain")
    assert result.returncode == 3
    assert result.stderr.strip() == f"kcoord: data directory {tmp_path}/plain is a file, not a directory"


def test_corrupt_identity_file_exits_3(tmp_path: Path) -> None:
    """A meta.properties without its keys is a data directory kcoord cannot use: exit 3, one line."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "meta.properties").write_text("version=1\n")
    result = serve(tmp_path / "data")
    assert result.returncode == 3 and no_traceback(result.stderr)
    assert "cannot be used: missing node.id in meta.properties" in last_line(result.stderr)


def test_bad_integer_value_names_the_expected_form(tmp_path: Path) -> None:
    """``--set num.partitions=abc`` says an integer in range is expected, not Python's int() message."""
    result = serve(tmp_path / "data", "127.0.0.1:0", "127.0.0.1:0", "--set", "num.partitions=abc")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "kcoord: bad setting: num.partitions: bad value 'abc' (flag): expected an integer from 1 to 100000"
    )
    assert not (tmp_path / "data").exists()


def test_unknown_setting_suggests_the_closest_names(tmp_path: Path) -> None:
    """A misspelt setting exits 2 and names the settings it probably meant."""
    result = serve(tmp_path / "data", "127.0.0.1:0", "127.0.0.1:0", "--set", "num.partitons=3")
    assert result.returncode == 2
    assert "num.partitons: no such setting (flag); did you mean num.partitions" in result.stderr


def test_bad_listener_address_exits_2(tmp_path: Path) -> None:
    """``--listen`` without a port says HOST:PORT is expected."""
    result = serve(tmp_path / "data", "localhost")
    assert result.returncode == 2 and "expected HOST:PORT" in result.stderr


def test_version_and_help_with_defaults_and_no_backticks() -> None:
    """``--version`` prints the package version; help shows defaults and no reStructuredText markup."""
    version = kcoord("--version")
    assert version.returncode == 0 and version.stdout.startswith("kcoord 0.")
    serve_help = " ".join(kcoord("serve", "--help").stdout.split())
    assert "default: PLAINTEXT://127.0.0.1:9092" in serve_help and "default: ./data" in serve_help
    assert "default: 127.0.0.1:9644" in serve_help
    every = [
        "serve",
        "config show",
        "groups",
        "groups reset-offsets",
        "topics",
        "topics create",
        "produce",
        "consume",
    ]
    for args in [["--help"], *([*command.split(), "--help"] for command in every)]:
        assert "``" not in kcoord(*args).stdout


def test_a_brand_new_data_dir_starts_clean(tmp_path: Path) -> None:
    """A first start on an empty directory has nothing to verify, so it logs clean_shutdown true."""
    server = KcoordProcess(tmp_path / "fresh").start()
    try:
        assert server.events("log_store.opened")[0]["clean_shutdown"] is True
    finally:
        assert server.terminate() == 0


def test_an_unknown_storage_scheme_is_named_without_the_urls_password(tmp_path: Path) -> None:
    """A mistyped ``--storage`` scheme stops the start naming the scheme, never the URL's password."""
    result = serve(
        tmp_path / "data",
        "127.0.0.1:0",
        "127.0.0.1:0",
        "--storage",
        "postgress://kcoord:s3cret-pw@127.0.0.1/kc",
    )
    assert result.returncode == 3 and no_traceback(result.stderr)
    assert "no log engine for postgress://" in last_line(result.stderr)
    assert "s3cret-pw" not in result.stderr + result.stdout


ACL_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("topics.json", b'{"version": 1, ', "is corrupt: Expecting property name enclosed in double quotes"),
        ("acls.json", b'{"version": 1}', "is corrupt: missing 'acls'"),
        ("scram-credentials.json", b"\xff\xfe not text", "is corrupt: "),
        ("topics.json", None, "cannot be read: is a directory"),
        ("acls.json", b'{"version": 99, "acls": []}', "is corrupt: unsupported ACL file version 99"),
        ("scram-credentials.json", None, "cannot be read: is a directory"),
    ],
    ids=[
        "topics-not-json",
        "acls-missing-key",
        "credentials-not-utf8",
        "topics-unreadable",
        "acls-version",
        "credentials-unreadable",
    ],
)
def test_a_corrupt_or_unreadable_data_file_exits_3_in_one_line(
    tmp_path: Path, name: str, content: bytes | None, reason: str
) -> None:
    """A damaged topics.json, acls.json or scram-credentials.json stops the start with exit 3 and one
    line naming the file and what is wrong with it; the log store is closed clean again."""
    data = tmp_path / "data"
    data.mkdir()
    if content is None:
        (data / name).mkdir()
    else:
        (data / name).write_bytes(content)
    result = serve(data, "127.0.0.1:0", "127.0.0.1:0", "--set", f"authorizer.class.name={ACL_AUTHORIZER}")
    assert result.returncode == 3 and no_traceback(result.stderr), result.stderr
    assert last_line(result.stderr).startswith(
        f"kcoord: data directory {data} cannot be used: {data / name} {reason}"
    )
    assert (data / CLEAN_SHUTDOWN_MARKER).exists()
