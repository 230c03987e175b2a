"""The fast ``__init__`` of the hot frozen dataclasses builds exactly what the generated one builds."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.coordinator.records import CoordinatorRecord, OffsetCommitKey, OffsetCommitValue
from kcoord.protocol.frozen_init import fast_frozen_init

_text = st.text(max_size=20)
_int = st.integers(-(1 << 63), (1 << 63) - 1)
_keys = st.builds(OffsetCommitKey, group=_text, topic=_text, partition=_int)
_values = st.builds(
    OffsetCommitValue,
    offset=_int,
    leader_epoch=_int,
    metadata=_text,
    commit_timestamp=_int,
    expire_timestamp=_int,
)
_ARGUMENTS: dict[type[Any], Any] = {
    OffsetCommitKey: st.tuples(_text, _text, _int),
    OffsetCommitValue: st.tuples(_int, _int, _text, _int) | st.tuples(_int, _int, _text, _int, _int),
    CoordinatorRecord: st.tuples(_keys, st.none() | _values),
}


def _generated(cls: type[Any], args: tuple[Any, ...]) -> Any:
    instance = object.__new__(cls)
    cls.__init__.generated(instance, *args)
    return instance


@pytest.mark.parametrize("cls", list(_ARGUMENTS), ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_fast_init_builds_what_the_generated_init_builds(cls: type[Any], data: st.DataObject) -> None:
    """Positional or keyword, defaults included: the same fields, equality, hash and repr; still frozen."""
    args = data.draw(_ARGUMENTS[cls])
    names = [field.name for field in dataclasses.fields(cls)]
    fast = cls(*args)
    by_keyword = cls(**dict(zip(names, args, strict=False)))
    expected = _generated(cls, args)
    assert fast == by_keyword == expected
    assert [getattr(fast, name) for name in names] == [getattr(expected, name) for name in names]
    assert hash(fast) == hash(expected)
    assert repr(fast) == repr(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(fast, names[0], args[0])


def test_only_simple_frozen_slots_dataclasses_qualify() -> None:
    """A class the fast init would not build faithfully is refused when it is defined."""

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Factory:
        a: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True, slots=True)
    class KeywordOnly:
        a: int = dataclasses.field(kw_only=True)

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NotFrozen, NoSlots, Factory, KeywordOnly, PostInit):
        with pytest.raises(TypeError):
            fast_frozen_init(cls)
