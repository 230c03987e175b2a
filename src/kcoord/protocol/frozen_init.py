"""A faster ``__init__`` for the frozen slots dataclasses built on every request.

A frozen dataclass's generated ``__init__`` sets each field through ``object.__setattr__`` (its own
``__setattr__`` refuses), which looks the name up on the class again for every field: measured
at about 780 ns for four fields against 370 ns for the same four stores through the slots' own
descriptors, and 180 ns for a dataclass that is not frozen. An OffsetCommit builds three such
objects (its record's key, value and the record around them; the request header is a named
tuple), so their construction was a visible part of a commit's event-loop CPU.

:func:`fast_frozen_init` replaces the generated ``__init__`` with one that stores each field
through its slot's descriptor, with the same parameters and defaults. Everything else (frozen
assignment refused, equality, hash, repr, ``dataclasses.replace``) is the dataclass's own. Only
simple classes qualify: slots, frozen, every field a plain init field (a default, no factory),
no ``__post_init__``; anything else raises ``TypeError`` when the class is defined.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_frozen_init"]

_Class = TypeVar("_Class", bound=type[Any])


def fast_frozen_init(cls: _Class) -> _Class:
    """Give the frozen slots dataclass ``cls`` an ``__init__`` that sets its slots directly.

    The generated ``__init__`` stays reachable as ``cls.__init__.generated`` (tests compare the two).
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a frozen slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    namespace: dict[str, Any] = {}
    parameters: list[str] = []
    stores: list[str] = []
    for index, field in enumerate(dataclasses.fields(cls)):
        if not field.init or field.kw_only or field.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{field.name} is not a plain init field")
        setter = f"_set_{index}"
        namespace[setter] = getattr(cls, field.name).__set__  # the slot's member descriptor
        if field.default is dataclasses.MISSING:
            parameters.append(field.name)
        else:
            namespace[f"_default_{index}"] = field.default
            parameters.append(f"{field.name}=_default_{index}")
        stores.append(f"    {setter}(self, {field.name})")
    source = f"def __init__(self, {', '.join(parameters)}):\n" + "\n".join(stores or ["    pass"]) + "\n"
    exec(source, namespace)  # as dataclasses builds its own __init__
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    init.generated = cls.__init__
    cls.__init__ = init
    return cls
