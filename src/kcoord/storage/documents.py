"""Small state documents kept whole: a node's files, or rows every node of a cluster shares.

ACLs, SCRAM credentials and group configs are few, change rarely and are read whole, so each kind
is one JSON document. On a single node it is a file of the data directory (:class:`FileDocument`,
replaced atomically); in cluster mode it is one row of PostgreSQL's ``shared_documents``
(:class:`kcoord.storage.postgres.shared_documents.SharedDocument`), which every node polls. Both
implement :class:`StateDocument`: the typed stores above (the authorizer's ACLs, the credentials,
the group configs) never ask which one they hold.

A change is a function from the document as it is to the document it becomes, applied under the
document's lock (the file's: one writer process; the row's: ``SELECT ... FOR UPDATE``), so two
nodes changing one document at once both land. It is durable when :meth:`StateDocument.update`
returns, which is before any client is answered.

:class:`Freshness` says how old a node's copy of the shared documents may be: a node that could not
read them for longer than the bound must not decide with what it has.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from kcoord.storage.atomic_file import write_text_atomically
from kcoord.storage.data_files import read_json_document

__all__ = ["Change", "FileDocument", "Freshness", "StateDocument"]

Change = Callable[[Any], Any]
"""The document as it is (None: none yet) to the document it becomes."""


class StateDocument(Protocol):
    """One kind of state as one JSON document."""

    @property
    def location(self) -> str:
        """Where the document lives, for log lines."""
        ...

    async def read_if_changed(self) -> tuple[bool, Any]:
        """(True, the document or None when there is none) when it changed since the last read or
        update through this object, (False, None) otherwise."""
        ...

    async def update(self, change: Change) -> Any:
        """Apply ``change`` to the current document durably; return the document it made."""
        ...


_PATH_LOCKS: dict[Path, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _lock_of(path: Path) -> threading.Lock:
    """The one lock of a file in this process, whichever :class:`FileDocument` changes it."""
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(path.resolve(), threading.Lock())


class FileDocument:
    """A JSON document in one file, replaced whole (temporary file, fsync, rename, fsync of the
    directory) in a worker thread; re-read when its mtime or size moved (an operator's ``kcoord
    users add`` on the data directory). A change reads, changes and writes under the file's lock,
    held in the worker thread, so changes within one process are serialised."""

    def __init__(self, path: Path, *, mode: int = 0o644) -> None:
        self.path = path
        self._mode = mode
        self._stamp: tuple[int, int] | None = None
        self._read_once = False

    @property
    def location(self) -> str:
        return str(self.path)

    def stamp(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of the file, None when it does not exist."""
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_mtime_ns, st.st_size

    def read(self) -> Any:
        """The document, None without a file (DataFileError when unreadable or not JSON). Blocking."""
        return read_json_document(self.path, lambda document: document, None)

    def write(self, document: Any) -> None:
        """Replace the file with ``document`` in one durable step. Blocking."""
        write_text_atomically(self.path, json.dumps(document, indent=1) + "\n", self._mode)

    async def read_if_changed(self) -> tuple[bool, Any]:
        stamp = await asyncio.to_thread(self.stamp)
        if self._read_once and stamp == self._stamp:
            return False, None
        document = await asyncio.to_thread(self.read)
        self._stamp, self._read_once = stamp, True
        return True, document

    async def update(self, change: Change) -> Any:
        document, self._stamp = await asyncio.to_thread(self._change, change)
        self._read_once = True
        return document

    def _change(self, change: Change) -> tuple[Any, tuple[int, int] | None]:
        with _lock_of(self.path):
            document = change(self.read())
            self.write(document)
            return document, self.stamp()


class Freshness:
    """Whether this node's copy of the shared documents is recent enough to decide with.

    A single node's files are always current (:meth:`always`). A cluster node's poller calls
    :meth:`succeeded` after each poll that read every document; past ``max_staleness_s`` without
    one, :meth:`fresh` is False and the node refuses rather than decide with what it last saw.
    """

    def __init__(self, max_staleness_s: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_staleness_s = max_staleness_s
        self._clock = clock
        self._last_success: float | None = None

    @classmethod
    def always(cls) -> Freshness:
        return cls(None)

    def succeeded(self) -> None:
        self._last_success = self._clock()

    def age_s(self) -> float | None:
        """Seconds since the last successful poll (None: never polled)."""
        return None if self._last_success is None else self._clock() - self._last_success

    def fresh(self) -> bool:
        if self.max_staleness_s is None:
            return True
        age = self.age_s()
        return age is not None and age <= self.max_staleness_s
