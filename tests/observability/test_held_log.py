"""The start's held log lines: written at once when the start succeeds, before the failure line into
a pipe or file, dropped at a terminal, and let go when a start takes longer than its hold."""

from __future__ import annotations

import io

from kcoord.observability.logging import HeldLog


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_held_lines_are_written_in_order_on_release() -> None:
    """Nothing reaches the stream while holding; release writes every line in order, then lines pass."""
    stream = io.StringIO()
    held = HeldLog(stream)
    held.hold()
    held.write("one\n")
    held.write("two\n")
    assert stream.getvalue() == ""
    held.release()
    held.write("three\n")
    assert stream.getvalue() == "one\ntwo\nthree\n"


def test_a_failed_start_keeps_the_lines_in_a_pipe_and_drops_them_at_a_terminal() -> None:
    """end_failed_start writes the held lines to a non-terminal stream and drops them at a terminal."""
    pipe, terminal = io.StringIO(), _Terminal()
    for stream in (pipe, terminal):
        held = HeldLog(stream)
        held.hold()
        held.write("opened\n")
        held.end_failed_start()
    assert (pipe.getvalue(), terminal.getvalue()) == ("opened\n", "")


def test_a_slow_start_stops_holding_after_its_hold() -> None:
    """A line written after the hold has expired lets every held line out, so a slow start is not silent."""
    stream, now = io.StringIO(), [100.0]
    held = HeldLog(stream, clock=lambda: now[0])
    held.hold(seconds=5)
    held.write("connecting\n")
    now[0] = 104.9
    held.write("still\n")
    assert stream.getvalue() == ""
    now[0] = 105.1
    held.write("still connecting\n")
    assert stream.getvalue() == "connecting\nstill\nstill connecting\n"
    assert not held.holding
