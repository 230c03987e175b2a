"""The topic and cluster APIs with the authorizer on, called as the composition root binds them:
each asks what Kafka asks and answers Kafka's authorization errors (the caller is User:ANONYMOUS
from 127.0.0.1, given or denied ACLs)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kcoord.apis.broker.describe_configs import RESOURCE_BROKER, RESOURCE_TOPIC
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode
from kcoord.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from tests.apis.broker.topic_app import TopicApp, call, secured_app

Op = AclOperation
ZERO = uuid.UUID(int=0)
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER


async def _secured(tmp_path: Path, *grants: tuple[ResourceType, str, AclOperation]) -> TopicApp:
    """Topics ``alpha`` and ``beta``; ANONYMOUS may do what ``grants`` say and nothing else."""
    app, _ = await secured_app(
        tmp_path,
        {"alpha": 1, "beta": 2},
        [
            AclBinding(kind, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op, AclPermission.ALLOW)
            for kind, name, op in grants
        ],
    )
    return app


def _metadata_body(names: list[str] | None, **extra: Any) -> dict[str, Any]:
    return {
        "topics": None if names is None else [{"name": n, "topic_id": ZERO} for n in names],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
        **extra,
    }


async def test_metadata_leaves_out_what_may_not_be_described(tmp_path: Path) -> None:
    """All topics: only the describable ones; a named one that is not: TOPIC_AUTHORIZATION_FAILED."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.READ))
    everything = await call(app, ApiKey.METADATA, 12, _metadata_body(None))
    named = await call(app, ApiKey.METADATA, 12, _metadata_body(["alpha", "beta"]))
    assert [t.name for t in everything.topics] == ["alpha"]
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("alpha", ErrorCode.none),
        ("beta", ErrorCode.topic_authorization_failed),
    ]


async def test_metadata_auto_creation_needs_create(tmp_path: Path) -> None:
    """An unknown topic is created only with Topic or Cluster CREATE; without it nothing is made."""
    app = await _secured(tmp_path, (TOPIC, "gamma", Op.DESCRIBE), (TOPIC, "delta", Op.ALL))
    refused = await call(app, ApiKey.METADATA, 9, _metadata_body(["gamma"]))
    created = await call(app, ApiKey.METADATA, 9, _metadata_body(["delta"]))
    assert refused.topics[0].error_code == ErrorCode.topic_authorization_failed
    assert created.topics[0].error_code == ErrorCode.none
    assert app.topics.get("gamma") is None and app.topics.get("delta") is not None


async def test_authorized_operations_are_the_principals(tmp_path: Path) -> None:
    """Asked for, a topic's and the cluster's bit sets hold what ACLs allow (READ implies DESCRIBE)."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.READ), (CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    body = _metadata_body(
        ["alpha"], include_topic_authorized_operations=True, include_cluster_authorized_operations=True
    )
    response = await call(app, ApiKey.METADATA, 10, body)
    cluster = await call(app, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
    assert response.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert response.cluster_authorized_operations == 1 << Op.DESCRIBE
    assert (cluster.error_code, cluster.cluster_authorized_operations) == (ErrorCode.none, 1 << Op.DESCRIBE)


async def test_describe_cluster_needs_no_acl(tmp_path: Path) -> None:
    """Without any ACL DescribeCluster still answers, as Kafka 4's; asked-for cluster operations are
    0 without Cluster DESCRIBE (there and in Metadata), even with another cluster ACL."""
    app = await _secured(tmp_path, (CLUSTER, CLUSTER_NAME, Op.CREATE))
    response = await call(app, ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
    metadata = await call(
        app, ApiKey.METADATA, 10, _metadata_body([], include_cluster_authorized_operations=True)
    )
    assert (response.error_code, response.cluster_authorized_operations) == (ErrorCode.none, 0)
    assert metadata.cluster_authorized_operations == 0
    assert [b.broker_id for b in response.brokers] == [app.node.node_id]


async def test_metadata_by_id_hides_the_name_of_a_topic_not_describable(tmp_path: Path) -> None:
    """Asked by id, an undescribable topic answers the id and a null name; by name, the name and
    a zero id."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.DESCRIBE))
    ids = [app.topics.get(n).topic_id for n in ("alpha", "beta")]  # type: ignore[union-attr]
    by_id = await call(
        app,
        ApiKey.METADATA,
        12,
        {**_metadata_body(None), "topics": [{"name": None, "topic_id": i} for i in ids]},
    )
    by_name = await call(app, ApiKey.METADATA, 12, _metadata_body(["beta"]))
    assert [(t.error_code, t.name, t.topic_id) for t in by_id.topics] == [
        (ErrorCode.none, "alpha", ids[0]),
        (ErrorCode.topic_authorization_failed, None, ids[1]),
    ]
    assert [(t.name, t.topic_id) for t in by_name.topics] == [("beta", None)]  # kio reads the zero id as None


def _new_topic(name: str) -> dict[str, Any]:
    return {"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}


async def test_create_topics_needs_topic_or_cluster_create(tmp_path: Path) -> None:
    """Topic CREATE allows that topic; others are TOPIC_AUTHORIZATION_FAILED; Cluster CREATE allows all."""
    app = await _secured(tmp_path, (TOPIC, "mine", Op.CREATE))
    body = {"topics": [_new_topic("mine"), _new_topic("theirs")], "timeout": 5000, "validate_only": False}
    response = await call(app, ApiKey.CREATE_TOPICS, 7, body)
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("mine", ErrorCode.none),
        ("theirs", ErrorCode.topic_authorization_failed),
    ]
    cluster_wide = await _secured(tmp_path / "cluster", (CLUSTER, CLUSTER_NAME, Op.CREATE))
    response = await call(cluster_wide, ApiKey.CREATE_TOPICS, 7, body)
    assert [t.error_code for t in response.topics] == [ErrorCode.none, ErrorCode.none]


async def test_delete_topics_needs_delete_and_create_partitions_needs_alter(tmp_path: Path) -> None:
    """DELETE and ALTER per topic; a refused topic keeps its logs and its partitions."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.DELETE), (TOPIC, "alpha", Op.ALTER))
    grown = await call(
        app,
        ApiKey.CREATE_PARTITIONS,
        3,
        {
            "topics": [{"name": n, "count": 4, "assignments": None} for n in ("alpha", "beta")],
            "timeout": 5000,
            "validate_only": False,
        },
    )
    deleted = await call(app, ApiKey.DELETE_TOPICS, 5, {"topic_names": ["alpha", "beta"], "timeout": 5000})
    assert [(r.name, r.error_code) for r in grown.results] == [
        ("alpha", ErrorCode.none),
        ("beta", ErrorCode.topic_authorization_failed),
    ]
    assert [(r.name, r.error_code) for r in deleted.responses] == [
        ("alpha", ErrorCode.none),
        ("beta", ErrorCode.topic_authorization_failed),
    ]
    beta = app.topics.get("beta")
    assert app.topics.get("alpha") is None and beta is not None and beta.partitions == 2


async def test_describe_configs_needs_describe_configs(tmp_path: Path) -> None:
    """Topic DESCRIBE_CONFIGS (implied by ALTER_CONFIGS); the broker's need Cluster DESCRIBE_CONFIGS."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.ALTER_CONFIGS))
    body = {
        "resources": [
            {"resource_type": RESOURCE_TOPIC, "resource_name": n, "configuration_keys": None}
            for n in ("alpha", "beta")
        ]
        + [{"resource_type": RESOURCE_BROKER, "resource_name": "7", "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    response = await call(app, ApiKey.DESCRIBE_CONFIGS, 4, body)
    assert [r.error_code for r in response.results] == [
        ErrorCode.none,
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
    ]
    assert response.results[0].configs


async def test_altering_topic_configs_needs_alter_configs_on_the_topic(tmp_path: Path) -> None:
    """IncrementalAlterConfigs for a topic: ALTER_CONFIGS on it alters, anything less (even
    DESCRIBE_CONFIGS) is TOPIC_AUTHORIZATION_FAILED and changes nothing."""
    app = await _secured(tmp_path, (TOPIC, "alpha", Op.ALTER_CONFIGS), (TOPIC, "beta", Op.DESCRIBE_CONFIGS))
    body = {
        "resources": [
            {
                "resource_type": RESOURCE_TOPIC,
                "resource_name": name,
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1000"}],
            }
            for name in ("alpha", "beta")
        ],
        "validate_only": False,
    }
    answer = await call(app, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert [(r.resource_name, r.error_code) for r in answer.responses] == [
        ("alpha", ErrorCode.none),
        ("beta", ErrorCode.topic_authorization_failed),
    ]
    assert dict(app.topics.get("alpha").configs) == {"retention.ms": "1000"}  # type: ignore[union-attr]
    assert dict(app.topics.get("beta").configs) == {}  # type: ignore[union-attr]
