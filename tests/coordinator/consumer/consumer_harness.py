"""A manual-clock harness around the pure consumer group manager."""

from __future__ import annotations

import itertools
import uuid

from kcoord.coordinator.assignors import Assignment
from kcoord.coordinator.consumer.config import ConsumerGroupConfig
from kcoord.coordinator.consumer.group_configs import GroupConfigOverrides
from kcoord.coordinator.consumer.manager import ConsumerGroupManager
from kcoord.coordinator.consumer.messages import ConsumerHeartbeatRequest, ConsumerHeartbeatResponse
from kcoord.coordinator.consumer.persistence import TopicIds
from kcoord.coordinator.records import CoordinatorRecord
from kcoord.protocol.errors import KafkaError

SESSION_MS = 45_000
REBALANCE_MS = 30_000
GROUP = "g"


class DictTimer:
    """Keyed deadlines in a dict; ``pop_due`` hands out the earliest due key."""

    def __init__(self) -> None:
        self.deadlines: dict[str, int] = {}

    def schedule(self, key: str, deadline_ms: int) -> None:
        self.deadlines[key] = deadline_ms

    def cancel(self, key: str) -> None:
        self.deadlines.pop(key, None)

    def deadline(self, key: str) -> int | None:
        return self.deadlines.get(key)

    def pop_due(self, now_ms: int) -> str | None:
        due = sorted((d, k) for k, d in self.deadlines.items() if d <= now_ms)
        if not due:
            return None
        del self.deadlines[due[0][1]]
        return due[0][1]


class Harness:
    def __init__(
        self,
        topics: dict[str, int] | None = None,
        assignors: tuple[str, ...] = ("uniform", "range"),
        overrides: GroupConfigOverrides | None = None,
    ) -> None:
        self.topics: dict[str, int] = dict(topics or {"orders": 6})
        self.timer = DictTimer()
        self.now = 1_000
        self.records: list[CoordinatorRecord] = []
        ids = itertools.count()
        self.manager = ConsumerGroupManager(
            self.timer,
            ConsumerGroupConfig(
                session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500, assignors=assignors
            ),
            self.topics.get,
            member_id_factory=lambda: f"gen-{next(ids)}",
            topic_ids=TopicIds(self.topic_id, self.topic_name),
            topic_names=lambda: list(self.topics),
            overrides=overrides,
        )

    def topic_id(self, name: str) -> uuid.UUID | None:
        return uuid.uuid5(uuid.NAMESPACE_URL, name) if name in self.topics else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((name for name in self.topics if self.topic_id(name) == topic_id), None)

    def beat(
        self,
        member_id: str,
        epoch: int,
        *,
        topics: tuple[str, ...] | None = None,
        owned: Assignment | None = None,
        instance_id: str | None = None,
        assignor: str | None = None,
    ) -> ConsumerHeartbeatResponse:
        return self.send(
            ConsumerHeartbeatRequest(
                group_id=GROUP,
                member_id=member_id,
                member_epoch=epoch,
                instance_id=instance_id,
                rebalance_timeout_ms=REBALANCE_MS if epoch == 0 else -1,
                subscribed_topics=topics,
                server_assignor=assignor,
                owned=owned,
            )
        )

    def send(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        """One heartbeat: its records are kept, its refusal raised."""
        change = self.manager.heartbeat(request, "beat", self.now)
        self.records.extend(change.records)
        ((_, response),) = change.responses
        if isinstance(response, KafkaError):
            raise response
        assert isinstance(response, ConsumerHeartbeatResponse)
        return response

    def topics_changed(self, topic: str) -> None:
        self.records.extend(self.manager.on_topics_changed(topic, self.now).records)

    def advance(self, ms: int) -> None:
        self.now += ms
        while (key := self.timer.pop_due(self.now)) is not None:
            change = self.manager.on_timer(key, self.now)
            if change is not None:
                self.records.extend(change.records)

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.manager.groups[GROUP]


def pairs(assignment: Assignment | None) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in (assignment or {}).items() for p in parts}
