"""The RE2 compilation of client patterns: Kafka's RE2J semantics (whole-name match, RE2 syntax)."""

from __future__ import annotations

import time

import pytest

from kcoord.coordinator.client_regex import compile_client_regex
from kcoord.protocol.errors import ErrorCode, KafkaError


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("orders-.*", "orders-1", True),
        ("orders-.*", "audit-orders-1", False),
        ("orders", "orders-1", False),
        ("a|ab", "ab", True),
        ("(?i)ORDERS-\\d+", "orders-42", True),
        ("[[:alpha:]]+\\.v\\d", "events.v2", True),
        ("\\Qa.b\\E", "a.b", True),
        ("\\Qa.b\\E", "axb", False),
        ("(?P<kind>orders|audit)-x", "audit-x", True),
        (".*", "", True),
        ("é+", "éé", True),
    ],
)
def test_a_pattern_selects_a_text_only_when_it_matches_the_whole_of_it(
    pattern: str, text: str, expected: bool
) -> None:
    """A valid pattern selects a text when it matches all of it (Java's Matcher.matches), not a prefix."""
    assert compile_client_regex(pattern, "SubscribedTopicRegex").matches(text) is expected


@pytest.mark.parametrize(
    "pattern",
    [
        "(",
        "orders-(",
        "[z-a]",
        "*a",
        "a{2,1}",
    ],
)
def test_a_pattern_that_does_not_parse_is_invalid_regular_expression(pattern: str) -> None:
    """A malformed pattern is INVALID_REGULAR_EXPRESSION, with the field and the pattern named."""
    with pytest.raises(KafkaError) as refused:
        compile_client_regex(pattern, "SubscribedTopicRegex")
    assert refused.value.code is ErrorCode.invalid_regular_expression
    assert f"SubscribedTopicRegex `{pattern}` is not a valid regular expression" in str(refused.value)


@pytest.mark.parametrize(
    "pattern",
    [
        "(a)\\1",
        "(?P<n>a)(?P=n)",
        "orders(?=-1)",
        "(?!audit).*",
        "(?<=x)y",
        "(?<!x)y",
        "a++",
        "(?>a+)",
        "a{1001}",
        "orders\\Z",
    ],
)
def test_what_python_re_accepts_but_re2_does_not_is_invalid_regular_expression(pattern: str) -> None:
    """Backreferences, lookaround, possessive and atomic groups, repetitions above 1000 and Python's
    ``\\Z`` are refused as Kafka's RE2J refuses them: INVALID_REGULAR_EXPRESSION."""
    with pytest.raises(KafkaError) as refused:
        compile_client_regex(pattern, "Transaction ID pattern")
    assert refused.value.code is ErrorCode.invalid_regular_expression
    assert "Transaction ID pattern" in str(refused.value)


def test_a_pattern_over_the_memory_budget_is_invalid_regular_expression() -> None:
    """A pattern whose RE2 program exceeds the 1 MiB budget is refused (the one difference from
    RE2J); large ASCII repetitions stay well inside it."""
    with pytest.raises(KafkaError) as refused:
        compile_client_regex("\\pL{300}", "SubscribedTopicRegex")
    assert refused.value.code is ErrorCode.invalid_regular_expression
    assert "pattern too large" in str(refused.value)
    assert compile_client_regex("[a-zA-Z0-9._-]{1000}", "SubscribedTopicRegex").matches("a" * 1000)


def test_a_pattern_that_is_not_utf8_is_invalid_regular_expression() -> None:
    """A lone surrogate (no UTF-8 form for RE2) is INVALID_REGULAR_EXPRESSION, not an exception escaping."""
    with pytest.raises(KafkaError) as refused:
        compile_client_regex("orders-\ud800", "SubscribedTopicRegex")
    assert refused.value.code is ErrorCode.invalid_regular_expression


def test_a_text_that_is_not_utf8_is_not_matched() -> None:
    """A text with a lone surrogate is simply not selected, even by ``.*``."""
    assert compile_client_regex(".*", "Transaction ID pattern").matches("id-\ud800") is False


def test_catastrophic_backtracking_patterns_match_in_linear_time() -> None:
    """Patterns that backtrack exponentially in Python's re (``(a+)+`` took 5.5 s on one 27-character
    name on this machine) decide 1,000 names of 245 characters within 2 s in all."""
    names = ["a" * 240 + f"-{index:04d}" for index in range(1_000)]
    started = time.perf_counter()
    for pattern in ("(a+)+", "(a|aa)+$", "(.*a){12}", "(a|a?)+b"):
        compiled = compile_client_regex(pattern, "SubscribedTopicRegex")
        assert not any(compiled.matches(name) for name in names)
        assert compiled.matches("a" * 240) is (pattern != "(a|a?)+b")
    assert time.perf_counter() - started < 2.0
