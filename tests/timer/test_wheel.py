"""Pure tests of the timing wheel with a manual clock: when keys fire, moves, cancels, far futures."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.timer.api import Timer
from kcoord.timer.clock import ManualClock
from kcoord.timer.wheel import TimingWheel

DAY_MS = 24 * 3600 * 1000


def test_wheel_satisfies_timer_protocol() -> None:
    """The wheel is usable wherever the coordinator expects a Timer."""
    timer: Timer = TimingWheel()
    timer.schedule("k", 5)
    assert timer.deadline("k") == 5


def test_fires_at_deadline_not_before() -> None:
    """A key is returned by the first advance that reaches its deadline, never one earlier."""
    clock = ManualClock(1_000)
    wheel = TimingWheel(start_ms=clock.now_ms())
    wheel.schedule("session:g:m", 1_537)
    assert wheel.advance(clock.advance(536)) == []
    assert wheel.deadline("session:g:m") == 1_537
    assert wheel.advance(clock.advance(1)) == ["session:g:m"]
    assert wheel.deadline("session:g:m") is None
    assert wheel.advance(clock.advance(10_000)) == []


def test_each_key_fires_once_across_many_advances() -> None:
    """Advancing in small steps past a deadline reports the key exactly once."""
    wheel = TimingWheel()
    wheel.schedule("k", 95)
    fired = [key for now in range(0, 300, 3) for key in wheel.advance(now)]
    assert fired == ["k"]


def test_moved_later_fires_at_new_deadline() -> None:
    """Moving a deadline later suppresses the old time and fires at the new one."""
    wheel = TimingWheel()
    wheel.schedule("k", 100)
    wheel.schedule("k", 5_000)
    assert wheel.advance(100) == []
    assert wheel.advance(4_999) == []
    assert wheel.advance(5_000) == ["k"]


def test_heartbeat_extensions_do_not_grow_slots() -> None:
    """Repeatedly extending one key later leaves a single slot entry (a dict update each time)."""
    wheel = TimingWheel()
    wheel.schedule("k", 45_000)
    for i in range(1, 1_000):
        wheel.schedule("k", 45_000 + i * 3_000)
    entries = sum(len(slot) for level in wheel._slots for slot in level)
    assert entries == 1
    assert wheel.advance(45_000 + 999 * 3_000 - 1) == []
    assert wheel.advance(45_000 + 999 * 3_000) == ["k"]


def test_moved_earlier_fires_on_time() -> None:
    """Moving a deadline earlier (even across levels) fires at the earlier time, and only once."""
    wheel = TimingWheel()
    wheel.schedule("k", 30 * 60_000)
    wheel.schedule("k", 250)
    assert wheel.advance(249) == []
    assert wheel.advance(250) == ["k"]
    assert wheel.advance(31 * 60_000) == []


def test_cancel_stops_firing_and_reschedule_after_cancel_works() -> None:
    """A cancelled key never fires; scheduling it again fires at the new deadline."""
    wheel = TimingWheel()
    wheel.schedule("a", 100)
    wheel.schedule("b", 100)
    wheel.cancel("a")
    wheel.cancel("missing")
    assert wheel.deadline("a") is None
    assert wheel.advance(200) == ["b"]
    wheel.schedule("a", 150)
    assert wheel.advance(200) == ["a"]


def test_cancel_then_schedule_later_than_old_slot() -> None:
    """A key cancelled and rescheduled beyond its stale slot fires at the new deadline only."""
    wheel = TimingWheel()
    wheel.schedule("k", 100)
    wheel.cancel("k")
    wheel.schedule("k", 900)
    assert wheel.advance(899) == []
    assert wheel.advance(900) == ["k"]


def test_past_deadline_fires_on_next_advance() -> None:
    """A deadline already in the past fires on the next advance."""
    wheel = TimingWheel(start_ms=10_000)
    wheel.advance(10_000)
    wheel.schedule("k", 3)
    assert wheel.advance(10_000) == ["k"]


def test_many_keys_fire_in_deadline_order() -> None:
    """Thousands of keys fire together in deadline order, each once."""
    wheel = TimingWheel()
    deadlines = {f"k{i}": (i * 7_919) % 100_000 for i in range(5_000)}
    for key, deadline in deadlines.items():
        wheel.schedule(key, deadline)
    fired = wheel.advance(100_000)
    assert sorted(fired) == sorted(deadlines)
    assert [deadlines[key] for key in fired] == sorted(deadlines.values())
    assert len(wheel) == 0


def test_far_future_deadlines_fire_after_a_big_jump() -> None:
    """Thirty-minute and seven-day deadlines fire exactly when reached, after big clock jumps."""
    clock = ManualClock(0)
    wheel = TimingWheel()
    wheel.schedule("session", 30 * 60_000)
    wheel.schedule("retention", 7 * DAY_MS)
    assert wheel.advance(clock.set(30 * 60_000 - 1)) == []
    assert wheel.advance(clock.advance(1)) == ["session"]
    assert wheel.advance(clock.set(7 * DAY_MS - 1)) == []
    assert wheel.advance(clock.advance(1)) == ["retention"]


def test_beyond_top_level_deadline_waits_and_fires() -> None:
    """A deadline past the whole wheel's reach is parked and still fires exactly on time."""
    wheel = TimingWheel(tick_ms=10, slot_bits=2, levels=2)
    far = 10 * 4 * 4 * 50 + 3
    wheel.schedule("k", far)
    for now in range(0, far, 37):
        assert wheel.advance(now) == []
    assert wheel.advance(far) == ["k"]


def test_next_wakeup_is_the_earliest_deadline() -> None:
    """The wakeup hint is never later than the earliest deadline and None when empty."""
    wheel = TimingWheel()
    assert wheel.next_wakeup_ms() is None
    wheel.schedule("late", 90_000)
    wheel.schedule("soon", 1_234)
    wakeup = wheel.next_wakeup_ms()
    assert wakeup is not None and wakeup <= 1_234
    wheel.advance(1_230)
    assert wheel.next_wakeup_ms() == 1_234
    assert wheel.advance(1_234) == ["soon"]
    wakeup = wheel.next_wakeup_ms()
    assert wakeup is not None and 1_234 < wakeup <= 90_000


class _CountingWheel(TimingWheel):
    """A wheel that counts how many slots it empties."""

    __slots__ = ("processed",)

    def __init__(self) -> None:
        super().__init__()
        self.processed = 0

    def _process(
        self, level: int, index: int, tick: int, now_ms: int, expired: list[tuple[int, str]]
    ) -> None:
        if (self._occupied[level] >> index) & 1:
            self.processed += 1
        super()._process(level, index, tick, now_ms, expired)


def test_jump_over_a_week_touches_only_occupied_slots() -> None:
    """A week-long jump (60 million ticks) empties a handful of slots, not one per tick."""
    wheel = _CountingWheel()
    wheel.schedule("k", 7 * DAY_MS + 5)
    assert wheel.advance(7 * DAY_MS + 5) == ["k"]
    assert wheel.processed <= 6


def _ops(reach_ms: int) -> st.SearchStrategy[list[tuple[str, int, int]]]:
    """Operations whose deadlines and clock steps go up to four times the wheel's reach."""
    far = 4 * reach_ms
    return st.lists(
        st.one_of(
            st.tuples(st.just("schedule"), st.integers(0, 15), st.integers(-50, far)),
            st.tuples(st.just("cancel"), st.integers(0, 15), st.just(0)),
            st.tuples(st.just("advance"), st.just(0), st.sampled_from([0, 1, 9, 10, 11, 640, far // 3, far])),
        ),
        max_size=120,
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data(), slot_bits=st.integers(1, 6), levels=st.integers(1, 4))
def test_matches_a_dict_model(data: st.DataObject, slot_bits: int, levels: int) -> None:
    """Under any sequence of operations the wheel fires exactly what a plain dict model says."""
    ops = data.draw(_ops(10 << (slot_bits * levels)))
    wheel = TimingWheel(tick_ms=10, slot_bits=slot_bits, levels=levels)
    model: dict[str, int] = {}
    now = 0
    for op, key_number, amount in ops:
        key = f"k{key_number}"
        if op == "schedule":
            wheel.schedule(key, now + amount)
            model[key] = now + amount
        elif op == "cancel":
            wheel.cancel(key)
            model.pop(key, None)
        else:
            now += amount
            fired = wheel.advance(now)
            due = {k: d for k, d in model.items() if d <= now}
            assert sorted(fired) == sorted(due)
            assert [due[k] for k in fired] == sorted(due.values())
            for k in fired:
                del model[k]
            wakeup = wheel.next_wakeup_ms()
            if model:
                assert wakeup is not None and now < wakeup <= min(model.values())
        assert {k: wheel.deadline(k) for k in model} == model
        assert len(wheel) == len(model)
