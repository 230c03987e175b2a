"""RegexSubscriptions: a regex runs once per topic name, not once per heartbeat or per topic change."""

from __future__ import annotations

import time

import pytest

from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.coordinator.consumer.regex_subscriptions import RegexSubscriptions
from kcoord.protocol.errors import ErrorCode, KafkaError

EXPENSIVE = "(.*a.*){1000}"
"""Linear in RE2, but about 1 ms per 245-character name on this machine (its DFA gives up)."""


def test_heartbeats_and_topic_changes_with_an_expensive_regex_run_it_on_new_names_only() -> None:
    """A regex costing about 1 ms a name over 300 names is matched once (about 0.35 s here); 200 more
    resolutions take less time in all than that first one, and so does resolving after a topic is
    created (only its name is matched) or deleted (dropped without matching)."""
    catalogue = ["a" * 240 + f"-{index:04d}" for index in range(300)]
    regexes = RegexSubscriptions(lambda: catalogue)
    member = ConsumerGroupMember(member_id="m", subscribed_regex=EXPENSIVE)

    started = time.perf_counter()
    assert regexes.resolve(member, None) is member, "no name has 1000 a's"
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(200):
        assert regexes.resolve(member, None) is member
    assert time.perf_counter() - started < first_s

    started = time.perf_counter()
    catalogue.append("a" * 1000)
    member = regexes.resolve(member, None)
    assert member.regex_topics == {"a" * 1000}
    catalogue.append("a" * 1001)
    member = regexes.resolve(member, None)
    assert member.regex_topics == {"a" * 1000, "a" * 1001}
    catalogue.remove("a" * 1000)
    member = regexes.resolve(member, None)
    assert member.regex_topics == {"a" * 1001}
    assert time.perf_counter() - started < first_s


def test_the_topic_filter_applies_to_remembered_topics() -> None:
    """The same regex resolved for two principals gives each only the topics its filter passes."""
    catalogue = ["orders-1", "orders-2", "audit"]
    regexes = RegexSubscriptions(lambda: catalogue)
    member = ConsumerGroupMember(member_id="m", subscribed_regex="orders-.*")
    assert regexes.resolve(member, None).regex_topics == {"orders-1", "orders-2"}
    assert regexes.resolve(member, {"orders-2"}.__contains__).regex_topics == {"orders-2"}


@pytest.mark.parametrize("regex", ["orders-(", "(?=orders)"])
def test_a_refused_regex_is_invalid_regular_expression_every_time(regex: str) -> None:
    """A regex RE2 refuses is INVALID_REGULAR_EXPRESSION at each resolution (nothing is remembered)."""
    regexes = RegexSubscriptions(lambda: ["orders-1"])
    member = ConsumerGroupMember(member_id="m", subscribed_regex=regex)
    for _ in range(2):
        with pytest.raises(KafkaError) as refused:
            regexes.resolve(member, None)
        assert refused.value.code is ErrorCode.invalid_regular_expression
