"""The pure parts of the limits: connection counting, offender logs, the memory pool, the creation quota
and the descriptor budget."""

from __future__ import annotations

import asyncio

import pytest
import structlog.testing

from kcoord.apis.broker.creation_limits import CreationLimits, DescriptorBudget
from kcoord.protocol.codec import RequestHeader
from kcoord.protocol.errors import ErrorCode
from kcoord.server.context import ConnectionInfo, RequestContext
from kcoord.server.limits import ConnectionLimits, parse_overrides
from kcoord.server.memory_pool import MemoryPool


def test_per_ip_limit_and_override_are_counted_per_address() -> None:
    """An address gets max.connections.per.ip connections, an overridden one its own count."""
    hits: list[str] = []
    limits = ConnectionLimits(
        max_connections=100, max_per_ip=2, per_ip_overrides={"10.0.0.9": 3}, observe=hits.append
    )
    assert [limits.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert [limits.admit("10.0.0.9") for _ in range(4)] == [True, True, True, False]
    assert hits == ["max.connections.per.ip", "max.connections.per.ip"]
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.1")
    assert limits.total == 5


def test_max_connections_bounds_every_address_together() -> None:
    """max.connections refuses a new connection from any address once the listener holds that many."""
    limits = ConnectionLimits(max_connections=2, max_per_ip=10)
    assert limits.admit("a") and limits.admit("b")
    assert not limits.admit("c")
    limits.release("a")
    assert limits.admit("c")


def test_a_refusal_is_logged_once_per_offender_until_it_is_back_under_its_limit() -> None:
    """Repeated refusals of one address make one log line; after it drops under its limit, a new one."""
    limits = ConnectionLimits(max_connections=100, max_per_ip=1)
    with structlog.testing.capture_logs() as logs:
        assert limits.admit("h")
        for _ in range(50):
            assert not limits.admit("h")
        limits.release("h")
        assert limits.admit("h")
        assert not limits.admit("h")
    assert [entry["event"] for entry in logs] == ["limit.exceeded", "limit.exceeded"]


def test_overrides_parse_kafkas_format() -> None:
    """``host:count`` pairs separated by commas, IPv6 hosts with or without brackets."""
    assert parse_overrides("127.0.0.1:5, [::1]:7,example.org:0") == {
        "127.0.0.1": 5,
        "::1": 7,
        "example.org": 0,
    }
    assert parse_overrides("") == {}
    with pytest.raises(ValueError):
        parse_overrides("127.0.0.1")


async def test_pool_grants_in_arrival_order_and_admits_an_oversized_frame_alone() -> None:
    """A waiting frame is not overtaken by later ones; one larger than the pool goes when it is empty."""
    pool = MemoryPool(100)
    assert pool.try_reserve(60)
    big = asyncio.ensure_future(pool.reserve(150))
    await asyncio.sleep(0)
    assert pool.waiting == 1 and not pool.try_reserve(10)
    small = asyncio.ensure_future(pool.reserve(10))
    await asyncio.sleep(0)
    assert not big.done() and not small.done()
    pool.release(60)
    await asyncio.sleep(0)
    assert big.done() and not small.done() and pool.used == 150
    pool.release(150)
    await asyncio.sleep(0)
    assert small.done() and pool.used == 10


async def test_a_cancelled_wait_leaves_no_reservation_behind() -> None:
    """A connection closed while its frame waits for memory neither holds bytes nor blocks others."""
    pool = MemoryPool(100)
    assert pool.try_reserve(100)
    waiter = asyncio.ensure_future(pool.reserve(50))
    behind = asyncio.ensure_future(pool.reserve(50))
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    pool.release(100)
    await asyncio.sleep(0)
    assert behind.done() and pool.used == 50 and pool.waiting == 0


def test_an_unbounded_pool_only_counts() -> None:
    """queued.max.request.bytes=-1 (Kafka's default) admits everything."""
    pool = MemoryPool(-1)
    assert pool.try_reserve(10**9) and pool.try_reserve(10**9)
    assert pool.used == 2 * 10**9


def test_the_descriptor_budget_refuses_partitions_that_would_eat_the_reserve() -> None:
    """With room for one more partition's descriptors besides the reserve, two are refused with
    POLICY_VIOLATION and one is allowed."""
    open_now = DescriptorBudget.open_descriptors()
    reserved = (open_now + 5) // 3  # small enough that the quarter-of-the-limit cap leaves it as is
    budget = DescriptorBudget(reserved=reserved, limit=open_now + reserved + 5)
    assert budget.reserved == reserved
    limits = CreationLimits(rate=0, max_partitions_per_request=100, descriptors=budget)
    request = limits.budget(_context(), quota_error=True)
    refusal = request.refusal(2)
    assert refusal is not None and refusal[0] == ErrorCode.policy_violation
    assert request.refusal(1) is None


def test_the_mutation_quota_refills_at_its_rate() -> None:
    """A client that overdrew its bucket is throttled until the rate has refilled it."""
    now = [0.0]
    limits = CreationLimits(rate=10, max_partitions_per_request=1000, clock=lambda: now[0])
    assert limits.budget(_context(), quota_error=True).refusal(15) is None
    throttled = limits.budget(_context(), quota_error=True)
    assert throttled.refusal(1) == (ErrorCode.throttling_quota_exceeded, ANY_MESSAGE)
    assert 500 <= throttled.throttle_ms <= 501
    now[0] = 0.6
    assert limits.budget(_context(), quota_error=False).refusal(1) is None


def test_no_mutation_quota_applies_unless_one_is_configured() -> None:
    """With Kafka's default (no controller mutation quota) one request creates 400 partitions and a
    second one as many at once."""
    limits = CreationLimits(rate=0, max_partitions_per_request=1000)
    for _ in range(2):
        budget = limits.budget(_context(), quota_error=True)
        assert all(budget.refusal(4) is None for _ in range(100))
        assert budget.throttle_ms == 0


class _AnyMessage(str):
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    __hash__ = str.__hash__


ANY_MESSAGE = _AnyMessage()


def _context() -> RequestContext:
    header = RequestHeader(19, 7, correlation_id=1, client_id="units")
    return RequestContext(header=header, connection=ConnectionInfo(1, "127.0.0.1", 50000))


def test_the_descriptor_reserve_is_at_most_a_quarter_of_the_limit() -> None:
    """Under a limit of 1,024 descriptors (a container's default) the reserve of 1,024 shrinks to 256,
    so topics can still be created; a generous limit keeps the configured reserve."""
    assert DescriptorBudget(reserved=1024, limit=1024).reserved == 256
    assert DescriptorBudget(reserved=1024, limit=65536).reserved == 1024
    small = DescriptorBudget(reserved=1024, limit=DescriptorBudget.open_descriptors() + 256 + 3 * 10)
    assert small.allows(10)
