"""``kcoord cluster status``: which node owns what, read from a node's ``/v1/cluster``."""

from __future__ import annotations

import argparse
import json
import urllib.error
from typing import Any

from kcoord.cli.client_config import add_command_config_argument, client_security
from kcoord.cli.http_endpoint import get_json, url_for

DEFAULT_METRICS = "127.0.0.1:9644"


def add_commands(commands: Any) -> None:
    """Add ``cluster status`` to the top-level subparsers."""
    cluster = commands.add_parser("cluster", help="a cluster of nodes over PostgreSQL")
    cluster_commands = cluster.add_subparsers(dest="cluster_command", required=True)
    status = cluster_commands.add_parser("status", help="live nodes and the owner of every partition")
    status.add_argument(
        "--metrics", metavar="HOST:PORT", default=DEFAULT_METRICS, help="any node's HTTP endpoint"
    )
    status.add_argument("--json", action="store_true", help="print the endpoint's JSON")
    add_command_config_argument(status)


def run(args: argparse.Namespace) -> int:
    security = client_security(args)
    url = url_for(args.metrics, "/v1/cluster", security)
    try:
        status: dict[str, Any] = get_json(url, security)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print(f"kcoord: cannot read {url}: {exc}")
        return 1
    if args.json:
        print(json.dumps(status, indent=1))
        return 0
    if not status.get("cluster"):
        print("single node (kcoord.cluster.enable is off)")
        return 0
    print(f"asked node {status['node_id']} (serving: {status['serving']})")
    owned: dict[int, int] = {}
    for entries in status["partitions"].values():
        for entry in entries:
            if entry["owner"] is not None:
                owned[entry["owner"]] = owned.get(entry["owner"], 0) + 1
    print(f"{'NODE':>6}  {'ADDRESS':<24} {'PARTITIONS':>10}")
    for node in status["live_nodes"]:
        address = f"{node['host']}:{node['port']}"
        print(f"{node['node_id']:>6}  {address:<24} {owned.get(node['node_id'], 0):>10}")
    print(f"\n{'TOPIC':<32} {'PARTITION':>9} {'OWNER':>6} {'EPOCH':>6}")
    for topic, entries in status["partitions"].items():
        for entry in entries:
            owner = "-" if entry["owner"] is None else str(entry["owner"])
            print(f"{topic:<32} {entry['partition']:>9} {owner:>6} {entry['epoch']:>6}")
    return 0
