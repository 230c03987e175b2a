"""The Grafana dashboard names only contracted metrics, and a running server exposes every one of them."""

from __future__ import annotations

import json
import re
import urllib.request
from typing import Any

from tests.container.files import DEPLOY, ContractMetric, metrics_contract
from tests.support.server import KcoordProcess

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "kcoord.json"
_METRIC = re.compile(r"\bkcoord_[a-z0-9_]+\b")
_HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def _expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            exprs.extend(t["expr"] for t in panel.get("targets", []) if t.get("expr"))
            walk(panel.get("panels", []))

    walk(dashboard["panels"])
    return exprs


def _family(series: str, contract: dict[str, ContractMetric]) -> str:
    """The metric a series belongs to: ``x_bucket`` of histogram ``x`` is ``x``."""
    for suffix in _HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and base in contract and contract[base].type == "histogram":
            return base
    return series


def _dashboard_metrics() -> set[str]:
    contract = metrics_contract()
    return {_family(name, contract) for expr in _expressions() for name in _METRIC.findall(expr)}


def test_dashboard_names_only_contracted_metrics() -> None:
    """Every kcoord_ series in a panel query is a metric of the contract (histograms via _bucket)."""
    names = _dashboard_metrics()
    assert names, "the dashboard queries no kcoord metrics"
    assert names <= set(metrics_contract()), names - set(metrics_contract())


def test_dashboard_has_the_operator_panels() -> None:
    """Panels cover rebalances by trigger, phase durations, members, group states, lag, requests, latency."""
    exprs = _expressions()
    wanted = [
        ("kcoord_rebalances_total", "by (trigger)"),
        ("kcoord_rebalance_duration_seconds_bucket", "by (phase, le)"),
        ("kcoord_group_members", ""),
        ("kcoord_groups", "by (state)"),
        ("kcoord_consumer_lag", "by (group, topic)"),
        ("kcoord_requests_total", "by (api, error)"),
        ("kcoord_request_duration_seconds_bucket", "by (api, le)"),
    ]
    for metric, grouping in wanted:
        assert any(re.search(rf"\b{metric}\b", e) and grouping in e for e in exprs), (metric, grouping)


def _scrape(server: KcoordProcess) -> str:
    address = getattr(server, "metrics_address", None)
    assert address, (
        "kcoord.started carries no metrics address: the /metrics endpoint (kcoord.metrics.listen) "
        "is not running"
    )
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        body: bytes = response.read()
    return body.decode()


def test_running_server_exposes_every_dashboard_metric_with_its_contract_type(kcoord: KcoordProcess) -> None:
    """/metrics of a live server declares each metric the dashboard uses, with the type the contract gives."""
    exposition = _scrape(kcoord)
    declared = dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, flags=re.MULTILINE))
    contract = metrics_contract()
    missing = {name for name in _dashboard_metrics() if name not in declared}
    assert not missing, f"not exposed by /metrics: {sorted(missing)}"
    wrong = {n: declared[n] for n in _dashboard_metrics() if declared[n] != contract[n].type}
    assert not wrong, f"types differ from the contract: {wrong}"
