"""``kcoord acls add|list|remove`` against a real server with the authorizer on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcoord.cli import main
from kcoord.cli.acls import operation
from kcoord.security.acl import AclOperation
from tests.support.server import KcoordProcess


def test_operation_names_are_read_as_kafka_spells_them() -> None:
    """Kafka's CamelCase, its enum names and dashed forms all name the operation; ANY does not."""
    assert operation("DescribeConfigs") is AclOperation.DESCRIBE_CONFIGS
    assert operation("IDEMPOTENT_WRITE") is AclOperation.IDEMPOTENT_WRITE
    assert operation("alter-configs") is AclOperation.ALTER_CONFIGS
    with pytest.raises(Exception, match="unknown operation"):
        operation("Any")


def test_add_list_remove(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Added ACLs are listed and persisted in the data directory; remove deletes exactly the named one."""
    server = kcoord_factory(
        tmp_path / "data",
        {
            "authorizer.class.name": "kcoord.security.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
        },
    ).start()
    bootstrap = ["--bootstrap", server.bootstrap]
    add = ["acls", "add", *bootstrap, "--group", "billing-", "--prefixed", "--principal", "User:alice"]
    assert main([*add, "--operation", "Read", "--operation", "Describe"]) == 0
    assert (
        main(
            [
                "acls",
                "add",
                *bootstrap,
                "--topic",
                "orders",
                "--principal",
                "User:*",
                "--operation",
                "Write",
                "--deny",
            ]
        )
        == 0
    )
    capsys.readouterr()

    assert main(["acls", "list", *bootstrap, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert sorted(
        (r["resource_name"], r["pattern_type"], r["principal"], r["operation"], r["permission"])
        for r in listed
    ) == [
        ("billing-", "PREFIXED", "User:alice", "DESCRIBE", "ALLOW"),
        ("billing-", "PREFIXED", "User:alice", "READ", "ALLOW"),
        ("orders", "LITERAL", "User:*", "WRITE", "DENY"),
    ]
    stored = json.loads((tmp_path / "data" / "acls.json").read_text())
    assert len(stored["acls"]) == 3

    assert main([*add, "--operation", "Describe"]) == 0, "adding an ACL that exists changes nothing"
    capsys.readouterr()
    assert (
        main(
            [
                "acls",
                "remove",
                *bootstrap,
                "--group",
                "billing-",
                "--prefixed",
                "--principal",
                "User:alice",
                "--operation",
                "Describe",
            ]
        )
        == 0
    )
    assert "removed 1 ACL(s)" in capsys.readouterr().out
    assert main(["acls", "list", *bootstrap, "--group", "billing-", "--prefixed"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == [
        "RESOURCE-TYPE",
        "PATTERN",
        "NAME",
        "PRINCIPAL",
        "HOST",
        "OPERATION",
        "PERMISSION",
    ]
    assert [line.split() for line in table[1:]] == [
        ["GROUP", "PREFIXED", "billing-", "User:alice", "*", "READ", "ALLOW"]
    ]


def test_acl_commands_against_a_server_without_authorizer_fail(
    kcoord_factory: type[KcoordProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without authorizer.class.name the server answers SECURITY_DISABLED and the command exits 1."""
    server = kcoord_factory(tmp_path / "data").start()
    assert main(["acls", "list", "--bootstrap", server.bootstrap]) == 1
    assert "SECURITY_DISABLED" in capsys.readouterr().err
