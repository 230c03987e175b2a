"""The built-in web console at ``/ui``: a static page (plain JavaScript and SVG, no build step)
that reads ``/v1/groups`` and ``/v1/groups/{group}`` and draws the groups, their members,
assignments and lag, and a timeline of each group's rebalances, refreshed every two seconds.

The page, its script and stylesheet ship as package data (``kcoord/observability/console/``).
They are read once, when the route is built at startup, so serving them never touches the disk
on the event loop.
"""

from __future__ import annotations

from importlib.resources import files

from kcoord.observability.http import HttpResponse, Route

__all__ = ["CONSOLE_PATH", "console_route"]

CONSOLE_PATH = "/ui"

_ASSETS = {
    "console.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}


def console_route() -> Route:
    """A route answering ``/ui`` (the page) and ``/ui/<asset>``; other paths are not its own."""
    folder = files("kcoord.observability").joinpath("console")
    assets = {
        name: HttpResponse(200, folder.joinpath(name).read_bytes(), content_type)
        for name, content_type in _ASSETS.items()
    }

    def route(path: str) -> HttpResponse | None:
        if path in (CONSOLE_PATH, CONSOLE_PATH + "/"):
            return assets["console.html"]
        if not path.startswith(CONSOLE_PATH + "/"):
            return None
        asset = assets.get(path[len(CONSOLE_PATH) + 1 :])
        return asset if asset is not None else HttpResponse(404, b"not found\n")

    return route
