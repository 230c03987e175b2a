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
its own is an :class:`OwnApi`: its handler's keyword parameters are its dependencies, and the
composition root passes them by those names (``list_offsets.api(topics=topics, authorizer=auth)``),
checked by mypy against the handler's signature. An API that builds what its handler takes from
what it is given (Metadata's answer caches, a decoder's cache of repeated requests) keeps its own
``def api(...)``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Concatenate, Generic, ParamSpec, TypeVar

from kcoord.cluster.identity import Node
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.registry import ApiSpec, Decoder, ErrorResponder
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext

_Part = TypeVar("_Part")
_Dependencies = ParamSpec("_Dependencies")

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


class OwnApi(DeclaredApi, Generic[_Dependencies]):
    """An API with dependencies of its own: called with them as keywords, typed by its handler's
    keyword parameters (see :func:`own_api`)."""

    __slots__ = ()

    def __call__(self, *positional: _Dependencies.args, **dependencies: _Dependencies.kwargs) -> ApiSpec:
        if positional:
            raise TypeError(f"{self.name}'s dependencies are passed by name")
        return self.bind(**dependencies)


def own_api(
    key: ApiKey,
    name: str,
    min_version: int,
    max_version: int,
    handler: Callable[Concatenate[RequestContext, Any, _Dependencies], Awaitable[Any]],
    error_response: ErrorResponder | None = None,
    decoder: Decoder | None = None,
) -> OwnApi[_Dependencies]:
    """``async def handle(ctx, request, *, <dependencies>)`` declared as an API whose call takes
    those dependencies."""
    return OwnApi(key, name, min_version, max_version, handler, error_response, decoder)
