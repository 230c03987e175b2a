"""The topic and metadata handlers, bound to real parts (settings, node, topic manager) as the
composition root binds them, and called directly.

Requests are built and responses encoded and decoded with kio at the version under test, so every
test also checks the wire shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader

from kcoord.apis.broker import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_topics,
    describe_cluster,
    describe_configs,
    incremental_alter_configs,
    metadata,
    offset_for_leader_epoch,
)
from kcoord.apis.broker.config_alteration import ConfigTargets
from kcoord.cluster import file_catalogue
from kcoord.cluster.broker_configs import BrokerConfigs
from kcoord.cluster.file_catalogue import FileCatalogue
from kcoord.cluster.identity import Node
from kcoord.cluster.leader_epochs import RecordedEpochs
from kcoord.cluster.topic_manager import TopicInfo, TopicManager
from kcoord.config import Settings
from kcoord.protocol.codec import (
    EncodedResponse,
    RequestHeader,
    build,
    encode_entity,
    request_class,
    response_class,
)
from kcoord.protocol.registry import ApiRegistry
from kcoord.runtime.group_config_store import GroupConfigStore, group_configs_file
from kcoord.security.acl import AclBinding
from kcoord.security.acl_store import AclStore, acl_file
from kcoord.security.authorizer import AclAuthorizer, build_authorizer
from kcoord.server.context import ConnectionInfo, RequestContext
from kcoord.storage.api import LogStore
from kcoord.storage.memory import MemoryLogStore

NODE_ID = 7
CLUSTER_ID = "kcoord-test-cluster"
ADVERTISED = ("127.0.0.1", 19092)


def make_settings(**flags: Any) -> Settings:
    """Settings with kcoord's defaults and ``flags`` (dots spelled as underscores)."""
    return Settings.load(environ={}, flags={k.replace("_", "."): v for k, v in flags.items()})


class TopicApp:
    """The parts the topic handlers are given, and those handlers registered over them."""

    def __init__(self, settings: Settings, store: LogStore, data_dir: Path) -> None:
        self.settings = settings
        self.store = store
        self.topics = TopicManager(store, settings, FileCatalogue(store, settings, data_dir))
        self.node = Node(NODE_ID, CLUSTER_ID, ADVERTISED)
        self.authorizer = auth = build_authorizer(settings, AclStore(acl_file(data_dir)))
        topics = self.topics
        self.broker_configs = BrokerConfigs(data_dir, settings, NODE_ID)
        self.broker_configs.appliers.append(lambda _changed: topics.reapply_log_configs())
        self.group_configs = GroupConfigStore(group_configs_file(data_dir))
        targets = ConfigTargets(settings, auth, topics, self.group_configs, self.broker_configs)
        self.registry = ApiRegistry(
            [
                metadata.api(
                    topics, self.node, auto_create=settings["auto.create.topics.enable"], authorizer=auth
                ),
                create_topics.api(topics=topics, settings=settings, node_id=NODE_ID, authorizer=auth),
                create_partitions.api(topics=topics, node_id=NODE_ID, authorizer=auth),
                delete_topics.api(topics=topics, enabled=settings["delete.topic.enable"], authorizer=auth),
                describe_configs.api(
                    topics=topics,
                    settings=settings,
                    node_id=NODE_ID,
                    authorizer=auth,
                    cluster_defaults=lambda: self.broker_configs.of(""),
                    group_configs=self.group_configs.overrides,
                ),
                incremental_alter_configs.api(targets),
                alter_configs.api(targets),
                describe_cluster.api(self.node, authorizer=auth),
                offset_for_leader_epoch.api(topics=topics, history=RecordedEpochs(), authorizer=auth),
            ]
        )


async def open_app(data_dir: Path, store: LogStore | None = None, **flags: Any) -> TopicApp:
    """A loaded app on ``store`` (a fresh ``memory://`` store by default)."""
    store = store if store is not None else MemoryLogStore()
    await store.open()
    app = TopicApp(make_settings(**flags), store, data_dir)
    await app.topics.load()
    await app.broker_configs.load()
    return app


async def secured_app(
    data_dir: Path, topics: Mapping[str, int], bindings: Sequence[AclBinding]
) -> tuple[TopicApp, AclAuthorizer]:
    """A loaded app under the standard authorizer holding ``topics`` (name -> partitions), with
    ``bindings`` as its only ACLs."""
    app = await open_app(data_dir, authorizer_class_name="kcoord.security.StandardAuthorizer")
    for name, partitions in topics.items():
        await app.topics.create(name, partitions)
    authorizer = app.authorizer
    assert isinstance(authorizer, AclAuthorizer)
    await authorizer.load()
    await authorizer.create(list(bindings))
    return app, authorizer


async def call(app: TopicApp, api_key: int, version: int, body: dict[str, Any]) -> Any:
    """Send ``body`` as request ``api_key`` v``version``; the response as the client decodes it."""
    request_cls = request_class(api_key, version)
    assert request_cls is not None, (api_key, version)
    request = build(request_cls, body)
    spec = app.registry.get(api_key)
    assert spec is not None and spec.min_version <= version <= spec.max_version
    header = RequestHeader(api_key, version, correlation_id=1, client_id="topic-tests")
    ctx = RequestContext(header=header, connection=ConnectionInfo(1, "127.0.0.1", 50000))
    body_out = await spec.handler(ctx, request)
    response_cls = response_class(api_key, version)
    if isinstance(body_out, EncodedResponse):
        encoded = body_out.body
    else:
        encoded = encode_entity(build(response_cls, body_out))
    decoded, end = entity_reader(response_cls)(encoded, 0)
    assert end == len(encoded)
    return decoded


def count_catalogue_writes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the topic catalogue's writes (each still written for real): one entry per write, its
    topic count."""
    writes: list[int] = []
    real_write = file_catalogue._write_catalogue

    def counted(path: Path, topics: list[TopicInfo], text: Any) -> None:
        writes.append(len(topics))
        real_write(path, topics, text)

    monkeypatch.setattr(file_catalogue, "_write_catalogue", counted)
    return writes
