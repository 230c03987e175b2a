"""Large Metadata answers without stalling other clients.

An all-topics Metadata answer is the same for every client the authorizer treats alike until the
catalogue changes, so it is encoded once per (version, options, what the answer depends on: the
principal's decisions, the listener's address and, in a cluster, the live nodes and owners) and
reused until a topic is created, grows or is deleted: twenty clients pipelining all-topics requests
cost one encoding, not one each. A request naming a few topics is answered the same way
(:class:`NamedTopicsAnswers`): a client asks for the same topics again and again, so its answer is
encoded once, as long as it carries no error (an error may hang on a quota or a creation under
way). An answer with more
than :data:`LARGE_ANSWER_TOPICS` topics is built and encoded on a worker thread; the interpreter
switches threads every few milliseconds, so the event loop keeps answering heartbeats meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from kcoord.cluster.topic_manager import TopicEvent, TopicInfo, TopicManager
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import EncodedResponse, build, encode_entity, response_class
from kcoord.protocol.errors import ErrorCode

LARGE_ANSWER_TOPICS = 500
MAX_CACHED_ANSWERS = 64
"""Cached all-topics answers, least recently used dropped first. A key holds the principal (ACLs
make answers differ per principal), so with eight slots a dozen principals evicted each other on
every request; 64 covers the principals of a typical deployment. Each entry is about as large as
the encoded catalogue (about 60 bytes a partition), so 64 entries of a 10,000-partition catalogue
stay near 40 MB at worst."""


def _encode(api_version: int, body: dict[str, Any]) -> EncodedResponse:
    cls = response_class(ApiKey.METADATA, api_version)
    flexible = bool(cls.__header_schema__.__flexible__)
    return EncodedResponse(encode_entity(build(cls, body)), flexible, _first_error(body), body)


async def encode_answer(api_version: int, body: dict[str, Any]) -> dict[str, Any] | EncodedResponse:
    """``body`` itself when small (the router encodes it); encoded on a thread when large."""
    if len(body["topics"]) <= LARGE_ANSWER_TOPICS:
        return body
    return await asyncio.to_thread(_encode, api_version, body)


def _first_error(body: dict[str, Any]) -> ErrorCode:
    for topic in body["topics"]:
        if topic["error_code"] != ErrorCode.none:
            return ErrorCode(topic["error_code"])
    return ErrorCode.none


NAMED_TOPICS_AT_MOST = 16
"""Requests naming more topics than this are answered afresh each time (their key would cost more
than it saves, and they are rare)."""
MAX_NAMED_ANSWERS = 1024
"""Cached named-topic answers; past this many the cache starts again empty."""


def _error_free(body: dict[str, Any]) -> bool:
    return all(
        topic["error_code"] == ErrorCode.none
        and all(partition["error_code"] == ErrorCode.none for partition in topic["partitions"])
        for topic in body["topics"]
    )


class NamedTopicsAnswers:
    """Encoded answers to requests naming a few topics, by (version, request, what else the answer
    depends on), dropped whenever the catalogue changes. Only answers without any error are kept.

    A kept answer is also checked at each use against the catalogue itself: each topic it describes
    must still be the very :class:`TopicInfo` it was built from (a topic is replaced, not changed,
    when it grows or is reconfigured), so an answer never outlives a change the listener has not
    been told of yet (a deletion under way, say)."""

    def __init__(self, topics: TopicManager) -> None:
        self._topics = topics
        self._answers: dict[Hashable, tuple[EncodedResponse, tuple[tuple[str, TopicInfo | None], ...]]] = {}
        self.generation = 0
        """Bumped at every catalogue change: an answer built across one is not kept."""
        topics.add_listener(self._changed)

    def _changed(self, _event: TopicEvent) -> None:
        self._answers = {}
        self.generation += 1

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: Hashable) -> EncodedResponse | None:
        kept = self._answers.get(key)
        if kept is None:
            return None
        answer, described = kept
        get = self._topics.get
        for name, info in described:
            if get(name) is not info:
                del self._answers[key]
                return None
        return answer

    def keep(
        self, key: Hashable, api_version: int, body: dict[str, Any], generation: int
    ) -> dict[str, Any] | EncodedResponse:
        """``body`` encoded and kept under ``key`` when it carries no error and the catalogue has not
        changed since ``generation``; else ``body`` itself (the router encodes it)."""
        if generation != self.generation or not _error_free(body):
            return body
        answer = _encode(api_version, body)
        described = tuple((topic["name"], self._topics.get(topic["name"])) for topic in body["topics"])
        if len(self._answers) >= MAX_NAMED_ANSWERS:
            self._answers = {}
        self._answers[key] = (answer, described)
        return answer


class AllTopicsAnswers:
    """Encoded all-topics answers, a bounded LRU dropped whenever the catalogue changes."""

    def __init__(self, topics: TopicManager) -> None:
        self._answers: dict[tuple[int, Hashable], asyncio.Future[EncodedResponse]] = {}
        topics.add_listener(self._changed)

    def _changed(self, _event: TopicEvent) -> None:
        self._answers = {}

    def __len__(self) -> int:
        return len(self._answers)

    async def answer(
        self, api_version: int, key: Hashable, build_body: Callable[[], Awaitable[dict[str, Any]]]
    ) -> EncodedResponse:
        """The cached answer for ``key``; built (once, however many ask meanwhile) when missing."""
        answers = self._answers
        pending = answers.pop((api_version, key), None)
        if pending is not None:
            answers[(api_version, key)] = pending  # most recently used last
        else:
            if len(answers) >= MAX_CACHED_ANSWERS:
                del answers[next(iter(answers))]
            pending = answers[(api_version, key)] = asyncio.get_running_loop().create_future()
            try:
                body = await build_body()
                pending.set_result(await asyncio.to_thread(_encode, api_version, body))
            except BaseException as exc:
                answers.pop((api_version, key), None)
                if isinstance(exc, Exception):
                    pending.set_exception(exc)
                    pending.exception()
                else:
                    pending.cancel()
                raise
        return await asyncio.shield(pending)
