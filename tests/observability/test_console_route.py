"""The /ui route: the page and its assets come from package data with the right content types."""

from __future__ import annotations

from kcoord.observability.console_route import console_route
from kcoord.observability.http import HttpEndpoint


def test_page_and_assets_are_served() -> None:
    """/ui and /ui/ give the page, which links the script and stylesheet served beside it."""
    endpoint = HttpEndpoint("127.0.0.1", 0, [console_route()])
    page = endpoint.respond("GET", "/ui")
    assert (page.status, page.content_type) == (200, "text/html; charset=utf-8")
    assert endpoint.respond("GET", "/ui/").body == page.body
    assert b'src="/ui/console.js"' in page.body and b'href="/ui/console.css"' in page.body
    script = endpoint.respond("GET", "/ui/console.js")
    assert (script.status, script.content_type) == (200, "text/javascript; charset=utf-8")
    assert b"/v1/groups" in script.body
    assert endpoint.respond("GET", "/ui/console.css").content_type == "text/css; charset=utf-8"


def test_unknown_assets_and_other_paths() -> None:
    """An unknown asset under /ui is a 404; paths outside /ui are left to other routes."""
    route = console_route()
    missing = route("/ui/../pyproject.toml")
    assert missing is not None and missing.status == 404
    assert route("/uix") is None and route("/v1/groups") is None
