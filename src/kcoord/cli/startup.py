"""``kcoord serve``: start the server, or end a start that cannot work in one line and an exit code.

Every mistake an operator can be expected to make before the first request is served ends with
``kcoord: ...`` on stderr instead of a traceback (the log lines of the start are held back until
it succeeds; a failed start shows them before that line only when stderr is not a terminal, see
:mod:`kcoord.observability.logging`): exit 2 for a bad setting (``kcoord.cli.main``),
3 for a data directory that cannot be used (a corrupt or unreadable ``topics.json``,
``acls.json`` or ``scram-credentials.json`` among them, or a data directory, database or node id that
another kcoord process holds), 4 for an address that cannot be bound. Every address is bound and the data
directory locked before anything in it is written (``App.start``), so a start refused for those leaves the
directory untouched; one that fails after the log store opened closes it again, so it stays clean.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import sys
import tempfile
from pathlib import Path

import structlog

from kcoord.cli.gc_tuning import tune_for_serving
from kcoord.config import Settings, SettingsError
from kcoord.observability.logging import START_LOG
from kcoord.protocol.errors import KafkaError
from kcoord.storage.data_files import DataFileError
from kcoord.storage.holding import StoreHeldError

EXIT_SETTING = 2
EXIT_DATA_DIR = 3
EXIT_ADDRESS = 4

STOP_MARGIN_S = 15.0
"""What a clean stop may take beyond draining requests (``kcoord.shutdown.timeout.ms``): every step
is bounded on its own, and this bounds them all, so a SIGTERMed node always exits."""

_BIND_ERRNOS = {errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES}


class StartupError(Exception):
    """A start that cannot succeed, or a node that cannot go on (another process took its database or
    its node id); the message is the one line the operator sees."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def serve(settings: Settings) -> int:
    """Run until SIGTERM/SIGINT; 0 after a clean stop, an ``EXIT_*`` code when the start fails."""
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        check_data_dir(Path(settings["log.dirs"]))
        tune_for_serving()
        with contextlib.suppress(KeyboardInterrupt):
            runner(_run_until_signalled(settings))
    except StartupError as exc:
        START_LOG.end_failed_start()
        print(f"kcoord: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:
        START_LOG.release()
    return 0


def check_data_dir(path: Path) -> None:
    """The data directory is a directory that takes a new file, or can be made (the node makes it only
    once its addresses are bound, so a start refused for a port leaves no directory behind)."""
    shown = str(path)
    if not path.exists() and not path.is_symlink():
        _check_creatable(path, shown)
        return
    if not path.is_dir():
        raise StartupError(f"data directory {shown} is a file, not a directory", EXIT_DATA_DIR)
    try:
        os.listdir(path)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise StartupError(
            f"data directory {shown} is not readable and writable: {_reason(exc)}", EXIT_DATA_DIR
        ) from None


def _check_creatable(path: Path, shown: str) -> None:
    """The nearest existing parent of a missing data directory is a directory this process may write."""
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StartupError(f"data directory {shown} cannot be created: a parent is a file", EXIT_DATA_DIR)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StartupError(
            f"data directory {shown} cannot be created: {os.strerror(errno.EACCES).lower()}", EXIT_DATA_DIR
        )


async def _run_until_signalled(settings: Settings) -> None:
    from kcoord.app import App

    data_dir = settings["log.dirs"]
    try:
        app = App(settings)
    except SettingsError as exc:
        raise StartupError(f"bad setting: {exc}", EXIT_SETTING) from None
    except (OSError, KeyError, ValueError) as exc:
        raise StartupError(
            f"data directory {data_dir} cannot be used: {_reason(exc)}", EXIT_DATA_DIR
        ) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await app.start()
    except StoreHeldError as exc:
        raise StartupError(str(exc), EXIT_DATA_DIR) from None
    except SettingsError as exc:
        raise StartupError(f"bad setting: {exc}", EXIT_SETTING) from None
    except KafkaError as exc:
        raise StartupError(f"storage cannot be used: {exc}", EXIT_DATA_DIR) from None
    except DataFileError as exc:
        raise StartupError(f"data directory {data_dir} cannot be used: {exc}", EXIT_DATA_DIR) from None
    except OSError as exc:
        unbound = app.listener.first_unbound()
        if _is_bind_error(exc) and (unbound is not None or app.http.bound is None):
            raise StartupError(_bind_message(settings, unbound, exc), EXIT_ADDRESS) from None
        raise StartupError(
            f"data directory {data_dir} cannot be used: {_reason(exc)}", EXIT_DATA_DIR
        ) from None
    START_LOG.release()
    signalled = asyncio.ensure_future(stop.wait())
    halted = asyncio.ensure_future(app.halted.wait())
    await asyncio.wait({signalled, halted}, return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    halted.cancel()
    logger = structlog.get_logger(__name__)
    logger.info("kcoord.stopping", reason=app.halt_reason or "signal")
    bound_s = settings["kcoord.shutdown.timeout.ms"] / 1000 + STOP_MARGIN_S
    try:
        await asyncio.wait_for(app.stop(), bound_s)
    except TimeoutError:
        logger.error("kcoord.stop_timed_out", timeout_s=bound_s)
    if app.halt_reason is not None:
        raise StartupError(app.halt_reason, EXIT_DATA_DIR)


def _is_bind_error(exc: OSError) -> bool:
    """A socket that could not bind; file errors (the data directory) carry a file name."""
    return exc.errno in _BIND_ERRNOS and exc.filename is None


def _bind_message(settings: Settings, kafka_address: tuple[str, int] | None, exc: OSError) -> str:
    """Names the address that could not be bound: a Kafka listener's, else the metrics endpoint's."""
    if kafka_address is not None:
        name, flag = "listeners", "--listen"
        host, port = kafka_address
    else:
        name, flag = "kcoord.metrics.listen", "--metrics-listen"
        host, port = settings[name]
    return f"cannot listen on {host}:{port} ({name}, {flag}): {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return os.strerror(exc.errno).lower()
    if isinstance(exc, KeyError):
        return f"missing {exc.args[0]} in meta.properties"
    return str(exc)
