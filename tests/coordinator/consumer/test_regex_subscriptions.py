"""RegexSubscriptions: a regex runs once per topic name, not once per heartbeat or per topic change."""

from __future__ import annotations

import time

import pytest

from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.coordinator.consumer.regex_subscriptions import INLINE_MATCH_CHARS, RegexSubscriptions
from kcoord.protocol.errors import ErrorCode, KafkaError

EXPENSIVE = "(.*a.*){1000}"
"""Linear in RE2, but about 1 ms per 245-character name on this machine (its DFA gives up)."""


def test_heartbeats_and_topic_changes_with_an_expensive_regex_run_it_on_new_names_only() -> None:
    """A regex costing about 1 ms a name over 300 long names is left as one job (too long for the
    coordinator's turn) and matched once when the job runs (about 0.35 s here); 200 more
    resolutions take less time in all than that match, and so does resolving after a topic is
    created (only its name is matched, on the turn) or deleted (dropped without matching)."""
    catalogue = ["a" * 240 + f"-{index:04d}" for index in range(300)]
    regexes = RegexSubscriptions(lambda: catalogue)
    member = ConsumerGroupMember(member_id="m", subscribed_regex=EXPENSIVE)

    assert regexes.resolve(member, None) is member, "nothing is matched on the turn"
    (job,) = regexes.take_jobs()
    assert (job.regex, len(job.names)) == (EXPENSIVE, 300)
    started = time.perf_counter()
    assert regexes.matched(job, job.run()), "no name has 1000 a's"
    first_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(200):
        assert regexes.resolve(member, None) is member
    assert time.perf_counter() - started < first_s
    assert regexes.take_jobs() == []

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
    assert regexes.take_jobs() == []


def test_a_long_match_is_one_job_fed_back_and_a_stale_job_is_dropped() -> None:
    """Over more than INLINE_MATCH_CHARS of names a new regex resolves to nothing and leaves one job
    (however often it is resolved meanwhile); the job's result resolves it; a job that was
    abandoned is made again, and one dropped by an unload is refused when it comes back."""
    catalogue = [f"orders-{index:05d}" for index in range(INLINE_MATCH_CHARS // 8)] + ["audit"]
    regexes = RegexSubscriptions(lambda: catalogue)
    member = ConsumerGroupMember(member_id="m", subscribed_regex="orders-0000[0-2]")
    for _ in range(3):
        assert regexes.resolve(member, None).regex_topics == frozenset()
    (job,) = regexes.take_jobs()
    assert regexes.take_jobs() == [] and regexes.resolve(member, None) is member
    regexes.abandoned(job)
    regexes.resolve(member, None)
    (again,) = regexes.take_jobs()
    assert regexes.matched(again, again.run())
    assert regexes.resolve(member, None).regex_topics == {"orders-00000", "orders-00001", "orders-00002"}

    other = ConsumerGroupMember(member_id="o", subscribed_regex="audit|orders-00001")
    regexes.resolve(other, None)
    (stale,) = regexes.take_jobs()
    regexes.clear()
    assert not regexes.matched(stale, stale.run())


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
