"""Reading the small JSON documents kcoord keeps in its data directory (topics, ACLs, credentials).

Each is written whole by kcoord itself (:mod:`kcoord.storage.atomic_file`), so one that cannot be
read or parsed was damaged or edited by hand. Every such way of being wrong — unreadable, not
UTF-8, not JSON, not the shape kcoord wrote — becomes one :class:`DataFileError` naming the file,
which the start turns into one line and the data-directory exit code instead of a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DataFileError", "parse_document", "read_json_document"]

T = TypeVar("T")


class DataFileError(ValueError):
    """A file of the data directory kcoord cannot use; the message names the file and why.

    A ValueError, as a corrupt file always was, so the commands that read these files (``kcoord
    users``) keep reporting it in one line."""


def read_json_document(path: Path, parse: Callable[[Any], T], missing: T) -> T:
    """``parse`` of the JSON document at ``path``, or ``missing`` when there is no such file.

    Blocking: call it from a thread (``asyncio.to_thread``) on the server.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return missing
    except OSError as exc:
        reason = os.strerror(exc.errno).lower() if exc.errno is not None else str(exc)
        raise DataFileError(f"{path} cannot be read: {reason}") from exc
    try:
        document = json.loads(raw)
    except ValueError as exc:  # JSON and UTF-8 errors are ValueErrors
        raise DataFileError(f"{path} is corrupt: {exc}") from exc
    return parse_document(str(path), parse, document)


def parse_document(location: str, parse: Callable[[Any], T], document: Any) -> T:
    """``parse`` of a JSON document read from ``location`` (a file, or a database row), every way
    of being the wrong shape turned into one :class:`DataFileError` naming the place."""
    try:
        return parse(document)
    except KeyError as exc:
        raise DataFileError(f"{location} is corrupt: missing {exc.args[0]!r}") from exc
    except (ValueError, TypeError, AttributeError) as exc:
        raise DataFileError(f"{location} is corrupt: {exc}") from exc
