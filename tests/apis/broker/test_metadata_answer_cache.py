"""The all-topics Metadata answer cache: one entry per principal, least recently used dropped first."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kcoord.apis.broker.metadata_answers import MAX_CACHED_ANSWERS, AllTopicsAnswers
from kcoord.cluster.topic_manager import TopicManager

VERSION = 12


class _Catalogue:
    """Only what the cache asks of the topic manager: a listener for catalogue changes."""

    def add_listener(self, _listener: Any) -> None:
        return None


def _body() -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": "c",
        "controller_id": 0,
        "topics": [],
    }


def test_each_principal_keeps_its_own_entry_and_the_bound_holds() -> None:
    async def scenario() -> tuple[list[str], int, list[str]]:
        cache = AllTopicsAnswers(cast(TopicManager, _Catalogue()))
        built: list[str] = []

        def builder(principal: str) -> Any:
            async def build_body() -> dict[str, Any]:
                built.append(principal)
                return _body()

            return build_body

        principals = [f"User:p{i}" for i in range(MAX_CACHED_ANSWERS)]
        for _ in range(3):
            for principal in principals:
                await cache.answer(VERSION, principal, builder(principal))
        first_rounds = list(built)
        await cache.answer(VERSION, principals[0], builder(principals[0]))  # p0 most recently used
        await cache.answer(VERSION, "User:newcomer", builder("User:newcomer"))  # evicts p1, not p0
        size = len(cache)
        built.clear()
        await cache.answer(VERSION, principals[0], builder(principals[0]))
        await cache.answer(VERSION, principals[1], builder(principals[1]))
        return first_rounds, size, built

    first_rounds, size, rebuilt = asyncio.run(scenario())
    assert first_rounds == [f"User:p{i}" for i in range(MAX_CACHED_ANSWERS)], "each built once, then hit"
    assert size == MAX_CACHED_ANSWERS
    assert rebuilt == ["User:p1"], "the least recently used entry was dropped, the recently used one kept"
