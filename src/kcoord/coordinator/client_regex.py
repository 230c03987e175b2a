"""Regular expressions that clients send, compiled with RE2: matching takes time linear in the text.

Apache Kafka compiles the client-supplied patterns (KIP-848's ``SubscribedTopicRegex`` and
ListTransactions v2's ``TransactionalIdPattern``) with RE2J, so kcoord uses RE2 for them too, not
Python's backtracking :mod:`re`: ``(a+)+`` against 26 ``a`` and a ``-`` held the event loop for
5.5 s, twice as long with each further ``a``. The consequences follow Kafka's:

- the syntax is RE2's; what RE2 rejects (backreferences, lookaround, possessive quantifiers, a
  repetition above 1000) is INVALID_REGULAR_EXPRESSION, as a pattern that does not parse;
- a name is selected when the whole of it matches (Java's ``Matcher.matches``), not a prefix.

Linear is not free: a crafted pattern whose DFA gives up, such as ``(.*a.*){1000}``, costs about
1 ms per 245-character name and 1-1.5 s per 32 KiB text. Callers match a pattern once per name
(regex subscriptions; a long first match off the event loop) or off the event loop
(ListTransactions); RE2 lets go of the GIL meanwhile.

One difference, on purpose: RE2 gives a pattern a memory budget, :data:`MEMORY_BUDGET`, and a
pattern that needs more is INVALID_REGULAR_EXPRESSION too (RE2J has no budget). It takes huge
repetitions of Unicode classes, such as ``\\pL{300}``, which cannot match a topic name (at most 249
characters from ``[a-zA-Z0-9._-]``); with RE2's default of 8 MiB such a pattern held about 4.6 MiB
and took 150 ms to compile, and the binding keeps the last 128 patterns compiled.
"""

from __future__ import annotations

from typing import Final, Protocol

import re2

from kcoord.protocol.errors import ErrorCode, KafkaError

__all__ = ["MEMORY_BUDGET", "ClientRegex", "compile_client_regex"]

MEMORY_BUDGET: Final = 1 << 20
"""RE2's ``max_mem`` for a client pattern: its program and its DFA's cache (1 MiB)."""

# RE2 would print every refused pattern to stderr, outside the structured logs. No group is ever
# read, so none captures: RE2 then decides a match with its DFA alone, several times faster.
_OPTIONS: Final = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.never_capture = True
_OPTIONS.max_mem = MEMORY_BUDGET


class _Compiled(Protocol):
    def fullmatch(self, text: str) -> object: ...


class ClientRegex:
    """A compiled client pattern; :meth:`matches` is true when it matches the whole text."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, compiled: _Compiled) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def matches(self, text: str) -> bool:
        try:
            return self._compiled.fullmatch(text) is not None
        except UnicodeEncodeError:
            # A lone surrogate cannot be UTF-8 for RE2; no name Kafka decodes from the wire has one.
            return False

    def __repr__(self) -> str:
        return f"ClientRegex({self.pattern!r})"


def compile_client_regex(pattern: str, field: str) -> ClientRegex:
    """``pattern`` compiled with RE2; INVALID_REGULAR_EXPRESSION (naming ``field``) when RE2 refuses it."""
    try:
        compiled = re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = _reason(exc)
        raise KafkaError(
            ErrorCode.invalid_regular_expression,
            f"{field} `{pattern}` is not a valid regular expression: {reason}.",
        ) from None
    except UnicodeEncodeError:
        raise KafkaError(
            ErrorCode.invalid_regular_expression, f"{field} is not a valid regular expression: not UTF-8."
        ) from None
    return ClientRegex(pattern, compiled)


def _reason(exc: Exception) -> str:
    """RE2's own words for a refusal (the binding hands them over as bytes)."""
    detail = exc.args[0] if exc.args else exc
    return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
