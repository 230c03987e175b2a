"""Limits on what requests may create: partitions per request and creation rates per client.

- ``kcoord.max.partitions.per.request``: once a request has created this many partitions, its later
  topics are refused. CreateTopics and CreatePartitions answer POLICY_VIOLATION (what Kafka answers
  when its creation policy refuses a topic); Metadata's auto-creation answers
  UNKNOWN_TOPIC_OR_PARTITION for the topics it did not create.
- ``controller.mutation.rate``: Kafka's controller mutation quota (KIP-599) for CreateTopics and
  CreatePartitions, partitions created per second per client (principal and client id), as a token
  bucket holding one second of the rate. As in Kafka there is none unless one is configured (the
  default 0 disables it). A topic is accepted while the bucket is not empty, so one topic may
  overdraw it (as Kafka's quota lets one request exceed it); once it is overdrawn, CreateTopics v6+
  and CreatePartitions v3+ answer THROTTLING_QUOTA_EXCEEDED, and older versions (whose clients do
  not know that code) POLICY_VIOLATION. ``throttle_time_ms`` says how long until the bucket is
  positive again.
- ``kcoord.auto.create.rate``: kcoord's own guard against a flood of auto-creation (a client naming
  ever new topics in Metadata requests), the same kind of bucket applied to Metadata's
  auto-creation only; past it those topics are answered UNKNOWN_TOPIC_OR_PARTITION. Kafka has no
  such limit; 0 disables it.

- The descriptor budget: every partition holds its segment files open (three descriptors for the
  active segment), so before creating partitions kcoord checks that the process would still have
  ``kcoord.descriptors.reserved`` descriptors left under its ``RLIMIT_NOFILE`` for connections and
  everything else. Past it, topics are refused as for the per-request limit (a new connection
  accepted and closed at once for want of a descriptor is worse than a topic not created).

Each refusal is counted, and logged once per client until the client's bucket refills.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import RequestContext
from kcoord.server.limits import LimitObserver, OffenderLog

_MAX_BUCKETS = 10_000
DESCRIPTORS_PER_PARTITION = 3
"""A partition's active segment: its log, offset index and time index files."""


class DescriptorBudget:
    """Whether the process can afford the descriptors of more partitions.

    The reserve kept free for connections is ``kcoord.descriptors.reserved`` but never more than a
    quarter of the limit: under a common default of 1,024 descriptors (a container's, say) a fixed
    reserve of 1,024 would refuse every topic.
    """

    def __init__(self, reserved: int, *, limit: int | None = None) -> None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        self.limit = limit if limit is not None else soft
        unlimited = self.limit == resource.RLIM_INFINITY or self.limit <= 0
        self.reserved = reserved if unlimited else min(reserved, self.limit // 4)

    @staticmethod
    def open_descriptors() -> int:
        try:
            return len(os.listdir("/proc/self/fd"))
        except OSError:
            return 0

    def allows(self, partitions: int, open_now: int | None = None) -> bool:
        """``open_now``: the process's open descriptors if the caller already counted them."""
        if self.limit == resource.RLIM_INFINITY or self.limit <= 0:
            return True
        needed = partitions * DESCRIPTORS_PER_PARTITION
        opened = self.open_descriptors() if open_now is None else open_now
        return opened + needed + self.reserved <= self.limit


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateQuota:
    """Partitions per second per client, as token buckets holding one second of the rate (0: none)."""

    def __init__(self, setting: str, rate: float, observe: LimitObserver, clock: Callable[[], float]) -> None:
        self.setting = setting
        self.rate = rate
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self.log = OffenderLog(setting, observe)

    def bucket(self, client: str) -> _Bucket:
        now = self._clock()
        bucket = self._buckets.get(client)
        if bucket is None:
            if len(self._buckets) >= _MAX_BUCKETS:
                self._forget_full(now)
            bucket = self._buckets[client] = _Bucket(self.rate, now)
        else:
            bucket.tokens = min(self.rate, bucket.tokens + (now - bucket.updated) * self.rate)
            bucket.updated = now
            if bucket.tokens >= self.rate:
                self.log.forgive(client)
        return bucket

    def _forget_full(self, now: float) -> None:
        for client, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.updated) * self.rate >= self.rate:
                del self._buckets[client]
        if len(self._buckets) >= _MAX_BUCKETS:
            self._buckets.clear()


class CreationLimits:
    def __init__(
        self,
        *,
        rate: float,
        max_partitions_per_request: int,
        auto_create_rate: float = 0.0,
        observe: LimitObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        descriptors: DescriptorBudget | None = None,
    ) -> None:
        self.max_partitions_per_request = max_partitions_per_request
        self.descriptors = descriptors
        observe = observe or (lambda _limit: None)
        self.mutation_quota = RateQuota("controller.mutation.rate", rate, observe, clock)
        self.auto_create_quota = RateQuota("kcoord.auto.create.rate", auto_create_rate, observe, clock)
        self.request_log = OffenderLog("kcoord.max.partitions.per.request", observe)
        self.descriptor_log = OffenderLog("kcoord.descriptors.reserved", observe)

    def budget(self, ctx: RequestContext, *, quota_error: bool, auto_create: bool = False) -> CreationBudget:
        """The budget of one request; ``quota_error``: the API version knows THROTTLING_QUOTA_EXCEEDED;
        ``auto_create``: Metadata's auto-creation, charged to ``kcoord.auto.create.rate`` instead of
        the controller mutation quota."""
        quota = self.auto_create_quota if auto_create else self.mutation_quota
        return CreationBudget(self, quota, f"{ctx.principal}/{ctx.client_id}@{ctx.client_host}", quota_error)


class CreationBudget:
    """What one request may still create."""

    def __init__(self, limits: CreationLimits, quota: RateQuota, client: str, quota_error: bool) -> None:
        self._limits = limits
        self._quota = quota
        self._client = client
        self._quota_error = quota_error
        self._created = 0
        self._open_at_start: int | None = None
        self.throttle_ms = 0

    def refusal(self, partitions: int, *, deferred: bool = False) -> tuple[ErrorCode, str] | None:
        """None and charged when ``partitions`` more may be created; else the error to answer.

        ``deferred``: the request creates what it was allowed only after asking for all of it (a
        Metadata request's round), so the descriptors are counted once and everything charged so
        far is added to them, instead of counting the open descriptors per topic.
        """
        limits, quota = self._limits, self._quota
        if self._created + partitions > limits.max_partitions_per_request:
            limits.request_log.refused(self._client, max=limits.max_partitions_per_request)
            return ErrorCode.policy_violation, (
                f"One request may create at most {limits.max_partitions_per_request} partitions."
            )
        if limits.descriptors is not None and not self._descriptors_allow(partitions, deferred):
            limits.descriptor_log.refused(self._client, descriptor_limit=limits.descriptors.limit)
            return ErrorCode.policy_violation, (
                "Creating these partitions would leave fewer than "
                f"{limits.descriptors.reserved} file descriptors for connections."
            )
        if quota.rate > 0:
            bucket = quota.bucket(self._client)
            if bucket.tokens <= 0:
                self.throttle_ms = max(self.throttle_ms, int(-bucket.tokens / quota.rate * 1000) + 1)
                quota.log.refused(self._client, rate=quota.rate)
                code = (
                    ErrorCode.throttling_quota_exceeded if self._quota_error else ErrorCode.policy_violation
                )
                return code, f"The {quota.setting} quota of {quota.rate:g} partitions/s is exceeded."
            bucket.tokens -= partitions
        self._created += partitions
        return None

    def _descriptors_allow(self, partitions: int, deferred: bool) -> bool:
        descriptors = self._limits.descriptors
        assert descriptors is not None
        if not deferred:
            return descriptors.allows(partitions)
        if self._open_at_start is None:
            self._open_at_start = descriptors.open_descriptors()
        return descriptors.allows(self._created + partitions, open_now=self._open_at_start)
