"""How an API module's handler is bound to the dependencies it needs.

Many APIs are served by the same few parts: the group APIs by the group service and the
authorizer, the transaction APIs by the transaction coordinator and the authorizer, the ACL APIs
by the authorizer alone. Each such family has one factory, a :class:`DeclaredApi` subclass whose
``__call__`` takes the family's dependencies, typed, as the composition root passes them
(``leave_group.api(groups, authorizer=auth)``). A module then declares its key, versions, handler
and error answer once, as data (``api = GroupApi(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 5, ...)``,
after its handler; the versions and what each changed open the module's docstring), and the
binding is written once per family instead of once per module.

The families: :class:`OnePartApi` (one part and the authorizer: ``GroupApi``, ``TransactionApi``,
:class:`NodeApi`), ``AclApi``, ``GroupDescribeApi``, ``ShareOffsetsApi``, ``SharePartitionsApi``
and ``ConfigAlterationApi``, each beside the helpers its APIs share. An API with dependencies of
its own keeps its own ``def api(...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from kcoord.cluster.identity import Node
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import ApiSpec, Decoder, ErrorResponder
from kcoord.security.authorizer import Authorizer

_Part = TypeVar("_Part")

BoundHandler = Callable[..., Awaitable[Any]]
"""``async def handle(ctx, request, *, <dependencies>)``: the response body."""


@dataclass(frozen=True, slots=True)
class DeclaredApi:
    """One API as its module declares it: key, name, versions, handler, error answer, decoder."""

    key: ApiKey
    name: str
    min_version: int
    max_version: int
    handler: BoundHandler
    error_response: ErrorResponder | None = None
    decoder: Decoder | None = None

    def bind(self, **dependencies: Any) -> ApiSpec:
        """The registry's spec, its handler given ``dependencies`` as keyword arguments."""
        handler = functools.partial(self.handler, **dependencies)
        return ApiSpec(
            self.key,
            self.name,
            self.min_version,
            self.max_version,
            handler,
            self.error_response,
            self.decoder,
        )


class OnePartApi(DeclaredApi, Generic[_Part]):
    """An API served by one part and the authorizer; its handler takes the part under the keyword
    named by the family's :attr:`part`."""

    __slots__ = ()
    part: ClassVar[str]

    def __call__(self, part: _Part, *, authorizer: Authorizer) -> ApiSpec:
        return self.bind(**{self.part: part}, authorizer=authorizer)


class NodeApi(OnePartApi[Node]):
    """An API answered from this node's identity (``node``): DescribeCluster, FindCoordinator."""

    __slots__ = ()
    part = "node"
