"""A small blocking Kafka-protocol client for the ``kcoord`` command line (groups, acls, health).

It speaks one fixed version of each API that kcoord serves, over one socket per broker, and
returns kio response entities. It is for operators' one-shot commands, not for load: no
pipelining, no retries beyond following FindCoordinator once.

Every connection (the bootstrap one and each coordinator's) is secured as the
:class:`~kcoord.cli.client_config.ClientSecurity` says: TLS first, then SaslHandshake v1 and
SaslAuthenticate v2 rounds (PLAIN, or SCRAM checked both ways), before any other request.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kcoord.cli.client_config import PLAINTEXT, ClientSecurity
from kcoord.cli.sasl_login import SaslLoginError, ScramLogin, plain_token
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.codec import build, request_class, response_class
from kcoord.protocol.errors import error_name
from kcoord.security.scram import ScramMechanism

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "AdminClient",
    "AdminError",
    "GroupOffsets",
    "offset_commit_body",
]

API_VERSIONS_V = 3
FIND_COORDINATOR_V = 3
LIST_GROUPS_V = 4
DESCRIBE_GROUPS_V = 5
CONSUMER_GROUP_DESCRIBE_V = 1  # v1 adds member_type: which members of a migrating group are classic
SHARE_GROUP_DESCRIBE_V = 1
DESCRIBE_SHARE_GROUP_OFFSETS_V = 1  # v1 adds lag
OFFSET_FETCH_V = 7
OFFSET_COMMIT_V = 8
DELETE_GROUPS_V = 2
METADATA_V = 12
LIST_OFFSETS_V = 7
ACLS_V = 3
SASL_HANDSHAKE_V = 1
SASL_AUTHENTICATE_V = 2
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


class AdminError(Exception):
    """The server could not be reached or answered with an error."""


@dataclass(frozen=True, slots=True)
class GroupOffsets:
    """A group's committed offsets and the partitions' log end offsets."""

    committed: dict[tuple[str, int], int]
    log_end: dict[tuple[str, int], int]


def offset_commit_body(
    group_id: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int]
) -> dict[str, Any]:
    """An OffsetCommit request committing ``offsets`` by (topic, partition), grouped by topic."""
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, []).append((partition, offset))
    return {
        "group_id": group_id,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "committed_offset": offset,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for partition, offset in parts
                ],
            }
            for topic, parts in by_topic.items()
        ],
    }


class _Connection:
    def __init__(
        self, host: str, port: int, timeout_s: float, client_id: str, security: ClientSecurity
    ) -> None:
        self._client_id = client_id
        self._correlation = 0
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise AdminError(f"cannot connect to {host}:{port}: {exc}") from exc
        self._sock: socket.socket = sock
        if security.ssl_context is not None:
            try:
                self._sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            except (OSError, ssl.SSLError) as exc:
                sock.close()
                raise AdminError(f"TLS with {host}:{port} failed: {exc}") from exc
        if security.sasl:
            try:
                self._authenticate(security)
            except (AdminError, SaslLoginError) as exc:
                self.close()
                raise AdminError(f"SASL {security.mechanism} login to {host}:{port} failed: {exc}") from exc

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then one SaslAuthenticate per client message (two for SCRAM)."""
        assert security.mechanism is not None and security.username is not None
        handshake = self.call(ApiKey.SASL_HANDSHAKE, SASL_HANDSHAKE_V, {"mechanism": security.mechanism})
        if int(handshake.error_code) != 0:
            offered = ", ".join(str(m) for m in handshake.mechanisms) or "none"
            raise AdminError(f"{error_name(int(handshake.error_code))} (the server offers {offered})")
        password = security.password or ""
        if security.mechanism == "PLAIN":
            self._sasl_round(plain_token(security.username, password))
            return
        mechanism = ScramMechanism.from_sasl_name(security.mechanism)
        assert mechanism is not None
        login = ScramLogin(mechanism, security.username, password)
        server_first = self._sasl_round(login.first())
        login.verify(self._sasl_round(login.final(server_first)))

    def _sasl_round(self, token: bytes) -> bytes:
        response = self.call(ApiKey.SASL_AUTHENTICATE, SASL_AUTHENTICATE_V, {"auth_bytes": token})
        if int(response.error_code) != 0:
            detail = f": {response.error_message}" if response.error_message else ""
            raise AdminError(f"{error_name(int(response.error_code))}{detail}")
        return bytes(response.auth_bytes)

    def close(self) -> None:
        self._sock.close()

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        cls = request_class(api_key, version)
        if cls is None:
            raise AdminError(f"no schema for api {api_key} v{version}")
        self._correlation += 1
        header_cls = cls.__header_schema__
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation,
            client_id=self._client_id,
        )
        buffer = io.BytesIO()
        entity_writer(header_cls)(buffer, header)
        entity_writer(cls)(buffer, build(cls, body))
        payload = buffer.getvalue()
        try:
            self._sock.sendall(struct.pack(">i", len(payload)) + payload)
            frame = self._recv_exact(struct.unpack(">i", self._recv_exact(4))[0])
        except OSError as exc:
            raise AdminError(f"request failed: {exc}") from exc
        response_cls = response_class(api_key, version)
        (correlation_id,) = struct.unpack_from(">i", frame, 0)
        if correlation_id != self._correlation:
            raise AdminError(f"correlation id {correlation_id} != {self._correlation}")
        offset = 4 + (1 if response_cls.__header_schema__.__flexible__ else 0)
        response, _ = entity_reader(response_cls)(frame, offset)
        return response

    def _recv_exact(self, size: int) -> bytes:
        chunks = []
        while size:
            chunk = self._sock.recv(size)
            if not chunk:
                raise ConnectionError("server closed the connection")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)


class AdminClient:
    """Group administration over the Kafka protocol against one bootstrap address."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_s: float = 10.0,
        client_id: str = "kcoord-cli",
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._timeout_s = timeout_s
        self._client_id = client_id
        self._security = security
        self._bootstrap = _Connection(host, port, timeout_s, client_id, security)
        self._coordinators: dict[tuple[str, int], _Connection] = {}
        self._max_versions: dict[int, int] | None = None

    def close(self) -> None:
        self._bootstrap.close()
        for connection in self._coordinators.values():
            connection.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def api_versions(self) -> Any:
        response = self._bootstrap.call(
            ApiKey.API_VERSIONS,
            API_VERSIONS_V,
            {"client_software_name": "kcoord-cli", "client_software_version": "1"},
        )
        if int(response.error_code) != 0:
            raise AdminError(f"ApiVersions: {error_name(int(response.error_code))}")
        return response

    def version_for(self, api_key: int, wanted: int) -> int:
        """``wanted``, or the server's highest version of ``api_key`` when that is lower (asked once)."""
        if self._max_versions is None:
            self._max_versions = {int(k.api_key): int(k.max_version) for k in self.api_versions().api_keys}
        return min(wanted, self._max_versions.get(int(api_key), wanted))

    def serves(self, api_key: int) -> bool:
        """Whether the server advertises ``api_key`` at all."""
        self.version_for(api_key, 0)
        return self._max_versions is not None and int(api_key) in self._max_versions

    def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group, sorted."""
        response = self._bootstrap.call(ApiKey.LIST_GROUPS, LIST_GROUPS_V, {"states_filter": []})
        if int(response.error_code) != 0:
            raise AdminError(f"ListGroups: {error_name(int(response.error_code))}")
        return sorted((str(g.group_id), str(g.protocol_type), str(g.group_state)) for g in response.groups)

    def describe_group(self, group_id: str) -> Any:
        response = self._coordinator(group_id).call(
            ApiKey.DESCRIBE_GROUPS,
            DESCRIBE_GROUPS_V,
            {"groups": [group_id], "include_authorized_operations": False},
        )
        (group,) = response.groups
        if int(group.error_code) != 0:
            raise AdminError(f"DescribeGroups {group_id}: {error_name(int(group.error_code))}")
        return group

    def describe_consumer_group(self, group_id: str) -> Any | None:
        """The KIP-848 consumer group (ConsumerGroupDescribe), or None when the id is not one."""
        response = self._coordinator(group_id).call(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            self.version_for(ApiKey.CONSUMER_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE_V),
            {"group_ids": [group_id], "include_authorized_operations": False},
        )
        (group,) = response.groups
        code = int(group.error_code)
        if code in (int(ErrorCode.group_id_not_found), int(ErrorCode.unsupported_version)):
            return None  # a classic group, or a server without KIP-848
        if code != 0:
            raise AdminError(f"ConsumerGroupDescribe {group_id}: {error_name(code)}")
        return group

    def describe_share_group(self, group_id: str) -> Any | None:
        """The share group (ShareGroupDescribe), or None when the id is not one (or the server has none)."""
        if not self.serves(ApiKey.SHARE_GROUP_DESCRIBE):
            return None
        response = self._coordinator(group_id).call(
            ApiKey.SHARE_GROUP_DESCRIBE,
            SHARE_GROUP_DESCRIBE_V,
            {"group_ids": [group_id], "include_authorized_operations": False},
        )
        (group,) = response.groups
        code = int(group.error_code)
        if code == int(ErrorCode.group_id_not_found):
            return None
        if code != 0:
            raise AdminError(f"ShareGroupDescribe {group_id}: {error_name(code)}")
        return group

    def share_group_offsets(self, group_id: str) -> list[tuple[str, int, int, int]]:
        """(topic, partition, start offset, lag) of every share partition the group has state for."""
        response = self._coordinator(group_id).call(
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
            self.version_for(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DESCRIBE_SHARE_GROUP_OFFSETS_V),
            {"groups": [{"group_id": group_id, "topics": None}]},
        )
        (group,) = response.groups
        if int(group.error_code) != 0:
            raise AdminError(f"DescribeShareGroupOffsets {group_id}: {error_name(int(group.error_code))}")
        return sorted(
            (str(t.topic_name), int(p.partition_index), int(p.start_offset), int(getattr(p, "lag", -1)))
            for t in group.topics
            for p in t.partitions
            if int(p.error_code) == 0
        )

    def group_offsets(self, group_id: str) -> GroupOffsets:
        """Committed offsets of every partition the group committed, with their log end offsets."""
        response = self._coordinator(group_id).call(
            ApiKey.OFFSET_FETCH,
            OFFSET_FETCH_V,
            {"group_id": group_id, "topics": None, "require_stable": False},
        )
        if int(response.error_code) != 0:
            raise AdminError(f"OffsetFetch {group_id}: {error_name(int(response.error_code))}")
        committed = {
            (str(topic.name), int(part.partition_index)): int(part.committed_offset)
            for topic in response.topics
            for part in topic.partitions
            if int(part.error_code) == 0 and int(part.committed_offset) >= 0
        }
        return GroupOffsets(committed, self.log_end_offsets(sorted(committed)))

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the bootstrap broker (kcoord is one node: it leads every partition)."""
        return self._bootstrap.call(api_key, version, body)

    def coordinator_call(self, group_id: str, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the group's coordinator (found once, then its connection is kept)."""
        return self._coordinator(group_id).call(api_key, version, body)

    def delete_group(self, group_id: str) -> None:
        """DeleteGroups; GROUP_ID_NOT_FOUND and NON_EMPTY_GROUP come back as :class:`AdminError`."""
        response = self._coordinator(group_id).call(
            ApiKey.DELETE_GROUPS, DELETE_GROUPS_V, {"groups_names": [group_id]}
        )
        (result,) = response.results
        if int(result.error_code) != 0:
            raise AdminError(f"DeleteGroups {group_id}: {error_name(int(result.error_code))}")

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commit as a non-member (generation -1), as ``kafka-consumer-groups --reset-offsets`` does.

        The coordinator accepts it only while the group is Empty; otherwise the first partition's
        error (UNKNOWN_MEMBER_ID, as Kafka) is raised.
        """
        body = offset_commit_body(group_id, -1, "", offsets)
        response = self._coordinator(group_id).call(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V, body)
        for topic in response.topics:
            for part in topic.partitions:
                if int(part.error_code) != 0:
                    raise AdminError(
                        f"OffsetCommit {group_id} {topic.name}-{part.partition_index}: "
                        f"{error_name(int(part.error_code))}"
                    )

    def partition_counts(self, topics: list[str] | None = None) -> dict[str, int]:
        """Partitions of each named topic (every topic when ``None``); unknown names raise."""
        response = self.metadata(topics)
        counts = {}
        for topic in response.topics:
            if int(topic.error_code) != 0:
                raise AdminError(f"topic {topic.name!r}: {error_name(int(topic.error_code))}")
            counts[str(topic.name)] = len(topic.partitions)
        return counts

    def metadata(self, topics: list[str] | None = None) -> Any:
        """Metadata without auto-creation: ``None`` lists every topic."""
        body = {
            "topics": None if topics is None else [{"name": name, "topic_id": None} for name in topics],
            "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False,
        }
        return self._bootstrap.call(ApiKey.METADATA, METADATA_V, body)

    def log_end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return self.list_offsets(partitions, LATEST_TIMESTAMP)

    def list_offsets(self, partitions: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """ListOffsets for one timestamp (or -1 latest, -2 earliest); -1 where no record is that late."""
        if not partitions:
            return {}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        response = self._bootstrap.call(
            ApiKey.LIST_OFFSETS,
            LIST_OFFSETS_V,
            {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                            for p in parts
                        ],
                    }
                    for topic, parts in by_topic.items()
                ],
            },
        )
        return {
            (str(topic.name), int(part.partition_index)): int(part.offset)
            for topic in response.topics
            for part in topic.partitions
            if int(part.error_code) == 0
        }

    def describe_acls(self, acl_filter: dict[str, Any]) -> Any:
        """The ACLs ``acl_filter`` (DescribeAcls v3 field names) selects, grouped by resource."""
        response = self._bootstrap.call(ApiKey.DESCRIBE_ACLS, ACLS_V, acl_filter)
        if int(response.error_code) != 0:
            raise AdminError(
                f"DescribeAcls: {error_name(int(response.error_code))} {response.error_message or ''}"
            )
        return response.resources

    def create_acls(self, creations: list[dict[str, Any]]) -> None:
        response = self._bootstrap.call(ApiKey.CREATE_ACLS, ACLS_V, {"creations": creations})
        failed = [r for r in response.results if int(r.error_code) != 0]
        if failed:
            reasons = "; ".join(f"{error_name(int(r.error_code))} {r.error_message or ''}" for r in failed)
            raise AdminError(f"CreateAcls: {reasons}")

    def delete_acls(self, filters: list[dict[str, Any]]) -> list[Any]:
        """The ACLs removed, over every filter."""
        response = self._bootstrap.call(ApiKey.DELETE_ACLS, ACLS_V, {"filters": filters})
        removed: list[Any] = []
        for result in response.filter_results:
            if int(result.error_code) != 0:
                raise AdminError(
                    f"DeleteAcls: {error_name(int(result.error_code))} {result.error_message or ''}"
                )
            removed.extend(result.matching_acls)
        return removed

    def transaction_coordinator_call(
        self, transactional_id: str, api_key: int, version: int, body: dict[str, Any]
    ) -> Any:
        """One request to the transactional id's coordinator (FindCoordinator key type 1)."""
        return self._coordinator(transactional_id, key_type=1).call(api_key, version, body)

    def broker_call(self, address: tuple[str, int], api_key: int, version: int, body: dict[str, Any]) -> Any:
        """One request to the broker at ``address`` (a partition's leader, as Metadata names it);
        its connection is kept like a coordinator's."""
        return self._connection(address).call(api_key, version, body)

    def _connection(self, address: tuple[str, int]) -> _Connection:
        if address not in self._coordinators:
            self._coordinators[address] = _Connection(
                *address, self._timeout_s, self._client_id, self._security
            )
        return self._coordinators[address]

    def _coordinator(self, group_id: str, key_type: int = 0) -> _Connection:
        response = self._bootstrap.call(
            ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V, {"key": group_id, "key_type": key_type}
        )
        if int(response.error_code) != 0:
            raise AdminError(f"FindCoordinator {group_id}: {error_name(int(response.error_code))}")
        return self._connection((str(response.host), int(response.port)))
