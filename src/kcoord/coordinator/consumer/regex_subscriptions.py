"""Regex subscriptions (KIP-848's ``SubscribedTopicRegex``): resolved by the coordinator, per member.

A member's regex resolves to the existing topics it matches in full (Java's ``Matcher.matches``;
RE2 syntax and linear-time matching, as Kafka's RE2J: :mod:`kcoord.coordinator.client_regex`)
that the member's principal may see: the API edge hands each heartbeat a :data:`TopicFilter` built
from the authorizer, as Kafka 4 filters regex-resolved topics by DESCRIBE. The filter is kept as
soft state per member so that a topic created or deleted between heartbeats is resolved with it. A
member's principal is unknown after a load until its next heartbeat: loading resolves as before the
failover, a topic change meanwhile adds nothing, and the heartbeat resolves again with the
principal before any assignment is answered.

What each regex matches is remembered with the catalogue it was matched against: a heartbeat runs
no regex, and after topics are created a regex is run on the new names only (RE2 is linear, but a
large pattern costs about a millisecond per long name): neither heartbeating quickly nor creating
topics makes the coordinator match a pattern against every topic again.

A match over more than :data:`INLINE_MATCH_CHARS` characters of names (a new regex over a large
catalogue: about 5 ms per thousand 30-character names for a plain pattern, about 1.2 s per thousand
249-character names for a crafted one) is not run on the coordinator's turn: it becomes a
:class:`RegexJob` that the runtime takes (:meth:`RegexSubscriptions.take_jobs`), runs off the event
loop and feeds back (:meth:`RegexSubscriptions.matched`), as Kafka resolves regexes off its
coordinator thread. Until then a member keeps the topics it had for that regex (after a load: the
ones in its records), and one that just subscribed with it gets what it matched before (nothing,
for a new regex); the result bumps the group epoch of the groups subscribed with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kcoord.coordinator.client_regex import ClientRegex, compile_client_regex
from kcoord.coordinator.consumer.group import ConsumerGroup
from kcoord.coordinator.consumer.member import ConsumerGroupMember
from kcoord.coordinator.consumer.messages import TopicFilter
from kcoord.protocol.errors import KafkaError

__all__ = ["INLINE_MATCH_CHARS", "RegexJob", "RegexSubscriptions"]

_REMEMBERED_REGEXES = 256
"""Most regexes remembered with their topics (all are forgotten past it)."""

INLINE_MATCH_CHARS = 16_384
"""Most characters of topic names a regex is matched against on the coordinator's turn (a crafted
pattern: about 65 ms); a longer match is a :class:`RegexJob`."""


@dataclass(frozen=True, slots=True, eq=False)
class RegexJob:
    """A regex to match against ``names``, the part of ``catalogue`` it has not been matched against."""

    regex: str
    pattern: ClientRegex
    catalogue: frozenset[str]
    names: tuple[str, ...]

    def run(self) -> frozenset[str]:
        """The names the regex matches in full (pure; the runtime runs it off the event loop)."""
        return frozenset(name for name in self.names if self.pattern.matches(name))


class RegexSubscriptions:
    """Resolves members' regexes against the topic catalogue, with each member's last topic filter."""

    def __init__(self, topic_names: Callable[[], Iterable[str]]) -> None:
        self._topic_names = topic_names
        self._filters: dict[tuple[str, str], TopicFilter | None] = {}
        """What each member's principal may see, from its last heartbeat (soft state)."""
        self._matching: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        """Each regex's last catalogue and the topics of it that the regex matches (soft state)."""
        self._pending: dict[str, RegexJob] = {}
        """Jobs the runtime has yet to take, by regex."""
        self._running: dict[str, RegexJob] = {}
        """Jobs the runtime took and has yet to feed back, by regex."""

    def remember(self, group_id: str, member_id: str, allowed: TopicFilter | None) -> None:
        self._filters[(group_id, member_id)] = allowed

    def forget(self, group_id: str, member_id: str) -> None:
        self._filters.pop((group_id, member_id), None)

    def clear(self) -> None:
        self._filters.clear()
        self._matching.clear()
        self._pending.clear()
        self._running.clear()

    def take_jobs(self) -> list[RegexJob]:
        """The matches left for the runtime to run; each must come back through :meth:`matched`
        or :meth:`abandoned`."""
        jobs = list(self._pending.values())
        self._pending.clear()
        self._running.update((job.regex, job) for job in jobs)
        return jobs

    def matched(self, job: RegexJob, names: frozenset[str]) -> bool:
        """Remember what ``job`` matched; False when it is stale (dropped by :meth:`clear`)."""
        if self._running.get(job.regex) is not job:
            return False
        del self._running[job.regex]
        _, matching = self._matching.get(job.regex, (frozenset(), frozenset()))
        self._remember_matching(job.regex, job.catalogue, (matching & job.catalogue) | names)
        return True

    def abandoned(self, job: RegexJob) -> None:
        """``job`` could not run: the regex is matched again at its next resolution."""
        if self._running.get(job.regex) is job:
            del self._running[job.regex]

    def resolve(
        self, member: ConsumerGroupMember, allowed: TopicFilter | None, *, same_regex: bool = True
    ) -> ConsumerGroupMember:
        """The member with its regex resolved to the existing topics ``allowed`` passes. While a job
        matches the regex off the event loop, a member whose topics were resolved for this same
        regex (``same_regex``: after a load, say) keeps them; otherwise it gets what the regex
        matched so far (nothing, for a new regex)."""
        if member.subscribed_regex is None:
            return member if not member.regex_topics else member.with_changes(regex_topics=frozenset())
        matching = self._topics_matching(member.subscribed_regex)
        if matching is None:
            if same_regex:
                return member
            matching = self._matched_so_far(member.subscribed_regex)
        matched = matching if allowed is None else frozenset(name for name in matching if allowed(name))
        return member if matched == member.regex_topics else member.with_changes(regex_topics=matched)

    def _matched_so_far(self, regex: str) -> frozenset[str]:
        _, matching = self._matching.get(regex, (frozenset(), frozenset()))
        return matching & frozenset(self._topic_names())

    def _topics_matching(self, regex: str) -> frozenset[str] | None:
        """The existing topics ``regex`` matches in full, None while a job matches it off the event
        loop; INVALID_REGULAR_EXPRESSION if RE2 refuses it."""
        catalogue = frozenset(self._topic_names())
        before, matching = self._matching.get(regex, (frozenset(), frozenset()))
        if catalogue == before and regex in self._matching:
            return matching
        pattern = compile_client_regex(regex, "SubscribedTopicRegex")
        if regex in self._pending or regex in self._running:
            return None
        names = tuple(catalogue - before)
        if sum(len(name) for name in names) > INLINE_MATCH_CHARS:
            self._pending[regex] = RegexJob(regex, pattern, catalogue, names)
            return None
        matching = (matching & catalogue) | frozenset(name for name in names if pattern.matches(name))
        self._remember_matching(regex, catalogue, matching)
        return matching

    def _remember_matching(self, regex: str, catalogue: frozenset[str], matching: frozenset[str]) -> None:
        if len(self._matching) >= _REMEMBERED_REGEXES and regex not in self._matching:
            self._matching.clear()
        self._matching[regex] = (catalogue, matching)

    def resolve_group(self, group: ConsumerGroup, *, loading: bool = False) -> bool:
        """Resolve every member's regex again; True when any member's topics changed."""
        changed = False
        for member in list(group.members.values()):
            if member.subscribed_regex is None:
                continue
            key = (group.group_id, member.member_id)
            if key in self._filters:
                allowed = self._filters[key]
            else:
                allowed = None if loading else member.regex_topics.__contains__
            try:
                resolved = self.resolve(member, allowed)
            except KafkaError:
                continue
            if resolved is not member:
                group.put_member(resolved)
                changed = True
        return changed
