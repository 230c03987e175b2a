"""``kcoord acls list|add|remove``: manage ACLs over the Kafka protocol (DescribeAcls, CreateAcls,
DeleteAcls), so the command works against any Kafka broker with an authorizer too.

``add`` and ``remove`` name one resource (``--topic``, ``--group``, ``--cluster`` or
``--transactional-id``, literal or ``--prefixed``), a principal, a host (default ``*``), one or
more ``--operation`` names as Kafka spells them (Read, Write, DescribeConfigs, All, ...) and
``--allow`` (default) or ``--deny``. ``list`` shows every ACL, or those of one resource.

Pointed at any node of a cluster, it manages the cluster's ACLs: the node commits the change to the
shared database before answering, and every node applies it within its poll interval (see
:mod:`kcoord.cluster.shared_state`).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from kcoord.cli.admin_client import AdminClient
from kcoord.cli.groups import add_server_arguments, client_for, reports_admin_errors
from kcoord.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)


def add_commands(commands: Any) -> None:
    """Add ``acls`` to the top-level subparsers."""
    acls = commands.add_parser("acls", help="list, add and remove ACLs")
    acl_commands = acls.add_subparsers(dest="acls_command", required=True)
    listing = acl_commands.add_parser("list", help="every ACL, or those of one resource")
    listing.add_argument("--json", action="store_true", help="print JSON")
    add = acl_commands.add_parser("add", help="create ACLs")
    remove = acl_commands.add_parser("remove", help="delete ACLs")
    add_server_arguments(listing, add, remove)
    for parser in (listing, add, remove):
        resource = parser.add_mutually_exclusive_group(required=parser is not listing)
        resource.add_argument("--topic", metavar="NAME")
        resource.add_argument("--group", metavar="NAME")
        resource.add_argument("--transactional-id", metavar="NAME")
        resource.add_argument("--cluster", action="store_true")
        parser.add_argument("--prefixed", action="store_true", help="the name is a prefix")
    for parser in (add, remove):
        parser.add_argument("--principal", required=True, help="e.g. User:alice, or User:* for everyone")
        parser.add_argument("--host", default=WILDCARD, help="client host (default: any)")
        parser.add_argument(
            "--operation", action="append", required=True, type=operation, help="Read, Write, All, ..."
        )
        permission = parser.add_mutually_exclusive_group()
        permission.add_argument("--allow", dest="deny", action="store_false", help="(default)")
        permission.add_argument("--deny", dest="deny", action="store_true")
        parser.set_defaults(deny=False)


def operation(text: str) -> AclOperation:
    """``Read``, ``DescribeConfigs``, ``describe-configs`` or ``IDEMPOTENT_WRITE`` -> the operation."""
    wanted = text.replace("-", "").replace("_", "").upper()
    for op in AclOperation:
        if op.name.replace("_", "") == wanted and op not in (AclOperation.ANY, AclOperation.UNKNOWN):
            return op
    raise argparse.ArgumentTypeError(f"unknown operation {text!r}")


@reports_admin_errors
def run(args: argparse.Namespace) -> int:
    with client_for(args) as client:
        if args.acls_command == "list":
            return _list(client, args)
        if args.acls_command == "add":
            client.create_acls(_bindings(args))
            return 0
        removed = client.delete_acls([_exact_filter(b) for b in _bindings(args)])
        print(f"removed {len(removed)} ACL(s)")
        return 0


def _resource(args: argparse.Namespace) -> tuple[ResourceType, str | None]:
    if args.topic is not None:
        return ResourceType.TOPIC, args.topic
    if args.group is not None:
        return ResourceType.GROUP, args.group
    if args.transactional_id is not None:
        return ResourceType.TRANSACTIONAL_ID, args.transactional_id
    if args.cluster:
        return ResourceType.CLUSTER, CLUSTER_NAME
    return ResourceType.ANY, None


def _bindings(args: argparse.Namespace) -> list[dict[str, Any]]:
    kind, name = _resource(args)
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    permission = AclPermission.DENY if args.deny else AclPermission.ALLOW
    return [
        {
            "resource_type": kind,
            "resource_name": name,
            "resource_pattern_type": pattern,
            "principal": args.principal,
            "host": args.host,
            "operation": op,
            "permission_type": permission,
        }
        for op in dict.fromkeys(args.operation)
    ]


def _exact_filter(binding: dict[str, Any]) -> dict[str, Any]:
    return {
        "resource_type_filter": binding["resource_type"],
        "resource_name_filter": binding["resource_name"],
        "pattern_type_filter": binding["resource_pattern_type"],
        "principal_filter": binding["principal"],
        "host_filter": binding["host"],
        "operation": binding["operation"],
        "permission_type": binding["permission_type"],
    }


def _list(client: AdminClient, args: argparse.Namespace) -> int:
    kind, name = _resource(args)
    pattern = (
        PatternType.ANY if name is None else (PatternType.PREFIXED if args.prefixed else PatternType.LITERAL)
    )
    resources = client.describe_acls(
        {
            "resource_type_filter": kind,
            "resource_name_filter": name,
            "pattern_type_filter": pattern,
            "principal_filter": None,
            "host_filter": None,
            "operation": AclOperation.ANY,
            "permission_type": AclPermission.ANY,
        }
    )
    rows = [
        {
            "resource_type": ResourceType(int(r.resource_type)).name,
            "pattern_type": PatternType(int(r.pattern_type)).name,
            "resource_name": r.resource_name,
            "principal": a.principal,
            "host": a.host,
            "operation": AclOperation(int(a.operation)).name,
            "permission": AclPermission(int(a.permission_type)).name,
        }
        for r in resources
        for a in r.acls
    ]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    headers = ["RESOURCE-TYPE", "PATTERN", "NAME", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]
    table = [headers, *[list(row.values()) for row in rows]]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(headers))]
    for line in table:
        print("  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip())
    return 0
