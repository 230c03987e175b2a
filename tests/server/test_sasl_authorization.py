"""Authorization as Kafka 4 does it, for SCRAM principals over raw frames on a SASL listener.

User ``alice`` may READ group ``g`` and DESCRIBE/READ topic ``public``; no ACL names topic
``secret``. User ``admin`` is a super user: it creates the topics and the ACLs over the wire and
serves as the control that sees everything alice may not.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from kcoord.protocol.api_keys import ApiKey
from kcoord.security.acl import AclOperation
from kcoord.security.credentials import CredentialFile
from kcoord.security.scram import ScramCredential, ScramMechanism
from tests.protocol.in_process import AsyncRawClient, connected, running_app
from tests.support.scram_client import ScramClient

SASL = "SASL_PLAINTEXT://127.0.0.1:0"
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
GROUP = "g"
# Kafka's wire numbers: resource GROUP 3, TOPIC 2; pattern LITERAL 3; operation READ 3, DESCRIBE 8;
# permission ALLOW 3.
ALICE_ACLS = [(3, GROUP, 3), (2, "public", 3), (2, "public", 8)]


def _write_users(data_dir: Path) -> None:
    CredentialFile(data_dir).write(
        {
            user: {
                ScramMechanism.SCRAM_SHA_512: ScramCredential.from_password(
                    ScramMechanism.SCRAM_SHA_512, password, 4096
                )
            }
            for user, password in PASSWORDS.items()
        }
    )


async def login(client: AsyncRawClient, user: str) -> None:
    handshake = await client.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-512"})
    assert handshake.error_code == ErrorCode.none
    scram = ScramClient("sha512", user, PASSWORDS[user])
    first = await client.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.first()})
    final = await client.call(
        ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": scram.final(bytes(first.auth_bytes))}
    )
    assert final.error_code == ErrorCode.none, final.error_message


@asynccontextmanager
async def as_user(port: int, user: str) -> AsyncIterator[AsyncRawClient]:
    async with connected(port, client_id=user) as client:
        await login(client, user)
        yield client


@asynccontextmanager
async def secured(data_dir: Path) -> AsyncIterator[tuple[int, dict[str, uuid.UUID]]]:
    """The server's port and the topic ids of ``public`` and ``secret`` (made by admin)."""
    _write_users(data_dir)
    settings = {
        "listeners": SASL,
        "authorizer.class.name": "kcoord.security.StandardAuthorizer",
        "super.users": "User:admin",
        "auto.create.topics.enable": "false",
    }
    async with running_app(data_dir, **settings) as (_, port), as_user(port, "admin") as admin:
        created = await admin.call(
            ApiKey.CREATE_TOPICS,
            7,
            {
                "topics": [
                    {
                        "name": n,
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                    for n in ("public", "secret")
                ],
                "timeout": 10_000,
                "validate_only": False,
            },
        )
        assert [t.error_code for t in created.topics] == [ErrorCode.none, ErrorCode.none]
        await grant_alice(admin, ALICE_ACLS)
        yield port, {t.name: t.topic_id for t in created.topics}


def _alice_acl(kind: int, name: str, operation: int) -> dict[str, Any]:
    return {
        "resource_type": kind,
        "resource_name": name,
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": operation,
        "permission_type": 3,
    }


async def grant_alice(admin: AsyncRawClient, acls: list[tuple[int, str, int]]) -> None:
    created = await admin.call(ApiKey.CREATE_ACLS, 3, {"creations": [_alice_acl(*acl) for acl in acls]})
    assert [r.error_code for r in created.results] == [ErrorCode.none] * len(acls)


async def revoke_alice(admin: AsyncRawClient, acl: tuple[int, str, int]) -> None:
    kind, name, operation = acl
    acl_filter = {
        "resource_type_filter": kind,
        "resource_name_filter": name,
        "pattern_type_filter": 3,
        "principal_filter": "User:alice",
        "host_filter": "*",
        "operation": operation,
        "permission_type": 3,
    }
    deleted = await admin.call(ApiKey.DELETE_ACLS, 3, {"filters": [acl_filter]})
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1]


def join_body(member_id: str, *, names: list[str] | None = None, regex: str | None = None) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "member_id": member_id,
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": names,
        "subscribed_topic_regex": regex,
        "topic_partitions": [],
    }


def assigned_ids(response: Any) -> set[uuid.UUID]:
    return {tp.topic_id for tp in response.assignment.topic_partitions}


async def test_subscribing_to_a_topic_without_describe_is_topic_authorization_failed(tmp_path: Path) -> None:
    """A heartbeat naming a topic alice may not DESCRIBE is refused whole and joins nobody."""
    async with secured(tmp_path) as (port, _), as_user(port, "alice") as alice:
        for names in (["secret"], ["public", "secret"]):
            refused = await alice.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(str(uuid.uuid4()), names=names)
            )
            assert (refused.error_code, refused.member_epoch) == (ErrorCode.topic_authorization_failed, -1)
        allowed = await alice.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(str(uuid.uuid4()), names=["public"])
        )
        assert allowed.error_code == ErrorCode.none
        described = await alice.call(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": [GROUP], "include_authorized_operations": False}
        )
        assert [len(g.members) for g in described.groups] == [1], "only the allowed join made a member"


async def test_a_regex_resolves_only_to_describable_topics(tmp_path: Path) -> None:
    """A regex matching both topics assigns alice only ``public``; admin's same regex gets both."""
    async with secured(tmp_path) as (port, ids), as_user(port, "alice") as alice:
        joined = await alice.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(str(uuid.uuid4()), regex="(public|secret)")
        )
        assert joined.error_code == ErrorCode.none
        assert assigned_ids(joined) == {ids["public"]}
        async with as_user(port, "admin") as admin:
            body = {**join_body(str(uuid.uuid4()), regex=".*"), "group_id": "admin-group"}
            control = await admin.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, body)
        assert assigned_ids(control) == {ids["public"], ids["secret"]}


async def test_a_regex_member_does_not_gain_a_new_secret_topic(tmp_path: Path) -> None:
    """A topic created later that the regex matches is resolved for alice only if she may see it."""
    async with secured(tmp_path) as (port, ids), as_user(port, "alice") as alice:
        member_id = str(uuid.uuid4())
        joined = await alice.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(member_id, regex="secret.*|public")
        )
        async with as_user(port, "admin") as admin:
            created = await admin.call(
                ApiKey.CREATE_TOPICS,
                7,
                {
                    "topics": [
                        {
                            "name": "secret-2",
                            "num_partitions": 1,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout": 10_000,
                    "validate_only": False,
                },
            )
            assert created.topics[0].error_code == ErrorCode.none
            beat = await alice.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT,
                1,
                {
                    "group_id": GROUP,
                    "member_id": member_id,
                    "member_epoch": joined.member_epoch,
                    "rebalance_timeout": -1,
                    "topic_partitions": [{"topic_id": ids["public"], "partitions": [0, 1]}],
                },
            )
            described = await admin.call(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                1,
                {"group_ids": [GROUP], "include_authorized_operations": False},
            )
        assert beat.error_code == ErrorCode.none
        (member,) = described.groups[0].members
        target = {tp.topic_name for tp in member.target_assignment.topic_partitions}
        assert target == {"public"}


async def test_consumer_group_describe_hides_a_group_naming_a_secret_topic(tmp_path: Path) -> None:
    """Before, alice sees the group and her group operations (READ implies DESCRIBE); once its
    assignment names ``secret``, her describe is TOPIC_AUTHORIZATION_FAILED with no members, while
    admin still sees it."""
    async with secured(tmp_path) as (port, _), as_user(port, "alice") as alice:
        describe = {"group_ids": [GROUP], "include_authorized_operations": False}
        await alice.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(str(uuid.uuid4()), names=["public"]))
        before = await alice.call(
            ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {**describe, "include_authorized_operations": True}
        )
        assert before.groups[0].error_code == ErrorCode.none
        assert before.groups[0].authorized_operations == (1 << AclOperation.READ) | (
            1 << AclOperation.DESCRIBE
        )
        async with as_user(port, "admin") as admin:
            joined = await admin.call(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(str(uuid.uuid4()), names=["secret"])
            )
            assert joined.error_code == ErrorCode.none
            seen_by_admin = await admin.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, describe)
        after = await alice.call(ApiKey.CONSUMER_GROUP_DESCRIBE, 1, describe)
        admin_topics = {
            tp.topic_name
            for m in seen_by_admin.groups[0].members
            for tp in m.target_assignment.topic_partitions
        }
        assert admin_topics == {"public", "secret"}
        (group,) = after.groups
        assert (group.error_code, list(group.members)) == (ErrorCode.topic_authorization_failed, [])
        assert "secret" not in repr(after)


async def test_metadata_by_an_unauthorized_id_answers_the_id_and_no_name(tmp_path: Path) -> None:
    """Metadata v12 asked by ``secret``'s id: TOPIC_AUTHORIZATION_FAILED, that id, a null name."""
    async with secured(tmp_path) as (port, ids), as_user(port, "alice") as alice:
        body = {
            "topics": [{"name": None, "topic_id": ids["secret"]}, {"name": None, "topic_id": ids["public"]}],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        answer = await alice.call(ApiKey.METADATA, 12, body)
        assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
            (ErrorCode.topic_authorization_failed, None, ids["secret"]),
            (ErrorCode.none, "public", ids["public"]),
        ]


async def test_describe_cluster_answers_everyone(tmp_path: Path) -> None:
    """Alice, with no cluster ACL, gets the brokers; asked for, her cluster operations are 0."""
    async with secured(tmp_path) as (port, _), as_user(port, "alice") as alice:
        asked = await alice.call(
            ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}
        )
        not_asked = await alice.call(
            ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1}
        )
        assert (asked.error_code, [b.port for b in asked.brokers]) == (ErrorCode.none, [port])
        assert asked.cluster_authorized_operations == 0
        assert not_asked.cluster_authorized_operations == -(2**31)


async def test_a_regex_follows_acl_changes_at_the_next_heartbeat(tmp_path: Path) -> None:
    """Granting alice DESCRIBE on ``secret`` adds it to her regex at her next heartbeat; revoking it
    takes it away again at the one after."""
    async with secured(tmp_path) as (port, ids), as_user(port, "alice") as alice:
        member_id = str(uuid.uuid4())
        joined = await alice.call(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_body(member_id, regex="public|secret")
        )
        epoch, owned = joined.member_epoch, [{"topic_id": ids["public"], "partitions": [0, 1]}]
        targets = []
        async with as_user(port, "admin") as admin:
            for change in (grant_alice(admin, [(2, "secret", 8)]), revoke_alice(admin, (2, "secret", 8))):
                await change
                beat = await alice.call(
                    ApiKey.CONSUMER_GROUP_HEARTBEAT,
                    1,
                    {
                        "group_id": GROUP,
                        "member_id": member_id,
                        "member_epoch": epoch,
                        "rebalance_timeout": -1,
                        "topic_partitions": owned,
                    },
                )
                assert beat.error_code == ErrorCode.none
                epoch = beat.member_epoch
                if beat.assignment is not None:
                    owned = [
                        {"topic_id": tp.topic_id, "partitions": list(tp.partitions)}
                        for tp in beat.assignment.topic_partitions
                    ]
                described = await admin.call(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    1,
                    {"group_ids": [GROUP], "include_authorized_operations": False},
                )
                (member,) = described.groups[0].members
                targets.append({tp.topic_name for tp in member.target_assignment.topic_partitions})
        assert targets == [{"public", "secret"}, {"public"}]
