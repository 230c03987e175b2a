"""Every setting kcoord reads: Kafka's property names and defaults, plus a few of kcoord's own.

kcoord's own settings start with ``kcoord.``; everything else means what it means in Apache Kafka.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kcoord.config.listeners import (
    DEFAULT_PROTOCOL_MAP,
    parse_listener_list,
    parse_optional_listener_list,
    parse_protocol_map,
)


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    default: Any
    parse: Callable[[Any], Any]
    doc: str


def _int(low: int | None = None, high: int | None = None) -> Callable[[Any], int]:
    def parse(raw: Any) -> int:
        if isinstance(raw, bool):
            raise ValueError("expected an integer, got a boolean")
        try:
            value = int(raw, 0) if isinstance(raw, str) else int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"expected an integer{_range_text(low, high)}") from None
        if low is not None and value < low:
            raise ValueError(f"must be at least {low}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {high}")
        return value

    return parse


def _range_text(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    return "" if high is None else f" of at most {high}"


def _float(low: float) -> Callable[[Any], float]:
    def parse(raw: Any) -> float:
        if isinstance(raw, bool):
            raise ValueError("expected a number, got a boolean")
        value = float(raw)
        if value < low:
            raise ValueError(f"must be at least {low}")
        return value

    return parse


def _bool(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = str(raw).strip()
        for choice in choices:
            if text.lower() == choice.lower():
                return choice
        raise ValueError(f"expected one of {', '.join(choices)}")

    return parse


def _str(raw: Any) -> str:
    return str(raw)


def _list(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, list | tuple):
        return tuple(str(x).strip() for x in raw)
    return tuple(x.strip() for x in str(raw).split(",") if x.strip())


def parse_host_port(raw: Any, default_port: int | None = None) -> tuple[str, int]:
    """``HOST:PORT``, ``[v6]:PORT`` or ``PLAINTEXT://HOST:PORT`` (Kafka's listener form).

    With ``default_port``, a bare ``HOST`` means that port (the command line's addresses).
    """
    text = str(raw).strip()
    if "://" in text:
        text = text.split("://", 1)[1]
    host, sep, port = text.rpartition(":")
    if not sep and default_port is not None:
        return text.strip("[]"), default_port
    if not sep or not port.isdigit():
        raise ValueError("expected HOST:PORT")
    host = host.strip("[]")
    value = int(port)
    if not 0 <= value <= 65535:
        raise ValueError("port must be 0..65535")
    return host, value


AUTHORIZER_CLASS_NAMES = (
    "kcoord.security.StandardAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
"""Values of ``authorizer.class.name`` that turn ACL authorization on (Kafka's names carry over)."""


def _authorizer_class(raw: Any) -> str:
    text = "" if raw is None else str(raw).strip()
    if text and text not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"expected empty or one of {', '.join(AUTHORIZER_CLASS_NAMES)}")
    return text


def _principals(raw: Any) -> tuple[str, ...]:
    """``User:alice;User:bob`` (Kafka's ``super.users``) -> ("User:alice", "User:bob")."""
    items = raw if isinstance(raw, list | tuple) else str(raw).split(";")
    principals = tuple(str(x).strip() for x in items if str(x).strip())
    for principal in principals:
        kind, sep, name = principal.partition(":")
        if not (kind and sep and name):
            raise ValueError(f"principal {principal!r} is not of the form TYPE:NAME")
    return principals


_DAY_MS = 24 * 3600 * 1000

DEFINITIONS: tuple[Definition, ...] = (
    # listeners and identity
    Definition(
        "listeners",
        "PLAINTEXT://127.0.0.1:9092",
        parse_listener_list,
        "NAME://HOST:PORT,... each bound on its own port (port 0: any); bare HOST:PORT is PLAINTEXT.",
    ),
    Definition(
        "advertised.listeners",
        None,
        parse_optional_listener_list,
        "NAME://HOST:PORT per listener given to clients; default: each listener's bound address.",
    ),
    Definition(
        "listener.security.protocol.map",
        DEFAULT_PROTOCOL_MAP,
        parse_protocol_map,
        "NAME:PROTOCOL for listener names that are not security protocols themselves.",
    ),
    Definition("log.dirs", "./data", _str, "Data directory (segments, offsets log, meta.properties)."),
    Definition("node.id", 1, _int(0), "Node id used when the data directory is new (then read from it)."),
    Definition("socket.request.max.bytes", 104857600, _int(1024), "Largest request frame accepted."),
    Definition("connections.max.idle.ms", 600000, _int(1000), "Idle connections are closed after this."),
    Definition(
        "socket.listen.backlog.size",
        4096,
        _int(1),
        "Pending connections the kernel queues per listener (Kafka's default is 50; a larger one lets a "
        "storm of connects wait instead of being dropped; Linux caps it at net.core.somaxconn).",
    ),
    # TLS (PEM only) and SASL
    Definition("ssl.keystore.type", "PEM", _choice("PEM"), "Format of the server's key and certificates."),
    Definition("ssl.keystore.location", "", _str, "PEM file holding the server's private key and chain."),
    Definition("ssl.keystore.certificate.chain", "", _str, "The server's certificate chain as PEM text."),
    Definition("ssl.keystore.key", "", _str, "The server's private key as PEM text."),
    Definition("ssl.key.password", "", _str, "Password of an encrypted private key."),
    Definition("ssl.truststore.type", "PEM", _choice("PEM"), "Format of the trusted CA certificates."),
    Definition("ssl.truststore.location", "", _str, "PEM file of the CAs client certificates must chain to."),
    Definition("ssl.truststore.certificates", "", _str, "Trusted CA certificates as PEM text."),
    Definition(
        "ssl.client.auth", "none", _choice("none", "requested", "required"), "Ask for a client certificate."
    ),
    Definition(
        "ssl.principal.mapping.rules", "DEFAULT", _choice("DEFAULT"), "Certificate subject -> principal name."
    ),
    Definition(
        "sasl.enabled.mechanisms",
        "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        _list,
        "SASL mechanisms offered on SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).",
    ),
    Definition(
        "connection.failed.authentication.delay.ms",
        100,
        _int(0),
        "Delay before answering a failed authentication (slows password guessing).",
    ),
    Definition(
        "sasl.server.max.receive.size",
        524288,
        _int(64),
        "Largest frame a SASL listener accepts before the connection has authenticated.",
    ),
    # limits
    Definition("socket.send.buffer.bytes", 102400, _int(-1), "SO_SNDBUF of client connections (-1: OS)."),
    Definition("socket.receive.buffer.bytes", -1, _int(-1), "SO_RCVBUF of client connections (-1: OS)."),
    Definition("max.connections", 2147483647, _int(1), "Most connections the listener holds."),
    Definition("max.connections.per.ip", 2147483647, _int(0), "Most connections from one address."),
    Definition("max.connections.per.ip.overrides", "", _str, "Per-address limits: HOST:COUNT,HOST:COUNT."),
    Definition(
        "queued.max.request.bytes",
        104857600,
        _int(-1),
        "Bytes of large requests (over 64 KiB) being read and processed at once (-1: unbounded).",
    ),
    Definition(
        "kcoord.request.read.timeout.ms", 30000, _int(1), "Longest wait for a frame's body after its size."
    ),
    Definition(
        "controller.mutation.rate",
        0.0,
        _float(0.0),
        "Partitions a client may create per second with CreateTopics and CreatePartitions (0: no quota).",
    ),
    Definition(
        "kcoord.auto.create.rate",
        100.0,
        _float(0.0),
        "Partitions a client may have auto-created per second by Metadata requests (0: no limit).",
    ),
    Definition(
        "kcoord.descriptors.reserved",
        1024,
        _int(0),
        "File descriptors kept free for connections: partitions that would use them are not created.",
    ),
    Definition(
        "kcoord.max.partitions.per.request",
        1000,
        _int(1),
        "Most partitions one request may create; beyond it topics get POLICY_VIOLATION.",
    ),
    # topics
    Definition(
        "auto.create.topics.enable", True, _bool, "Create topics on Metadata/Produce for unknown names."
    ),
    Definition("num.partitions", 1, _int(1, 100000), "Partitions of an auto-created topic."),
    Definition("default.replication.factor", 1, _int(1, 1), "Replicas of an auto-created topic (one node)."),
    Definition("delete.topic.enable", True, _bool, "Allow DeleteTopics."),
    Definition("message.max.bytes", 1048588, _int(0), "Largest record batch accepted."),
    # log engine
    Definition("log.segment.bytes", 1073741824, _int(14), "Segment size before a roll."),
    Definition("log.roll.ms", 7 * _DAY_MS, _int(1), "Segment age before a roll."),
    Definition(
        "log.retention.ms", 7 * _DAY_MS, _int(-1), "Age at which whole segments are deleted (-1: never)."
    ),
    Definition("log.retention.bytes", -1, _int(-1), "Partition size past which old segments go (-1: none)."),
    Definition("log.retention.check.interval.ms", 300000, _int(1), "How often retention runs."),
    Definition("log.index.interval.bytes", 4096, _int(0), "Bytes between sparse index entries."),
    Definition(
        "log.flush.policy",
        "always",
        _choice("always", "interval"),
        "always: fsync before acknowledging; interval: fsync every log.flush.interval.ms.",
    ),
    Definition("log.flush.interval.ms", 1000, _int(1), "fsync period when log.flush.policy=interval."),
    Definition("log.cleaner.backoff.ms", 15000, _int(0), "Pause between compaction passes (0: no cleaner)."),
    Definition(
        "log.message.timestamp.type", "CreateTime", _choice("CreateTime", "LogAppendTime"), "Timestamp kind."
    ),
    # offsets log and groups
    Definition("offsets.topic.num.partitions", 50, _int(1, 1000), "Partitions of __consumer_offsets."),
    Definition(
        "offsets.topic.replication.factor", 1, _int(1, 1), "Replicas of __consumer_offsets (one node: 1)."
    ),
    Definition("offsets.topic.segment.bytes", 104857600, _int(14), "Segment size of __consumer_offsets."),
    Definition("offsets.retention.minutes", 10080, _int(1), "Offsets of an empty group expire after this."),
    Definition("offsets.retention.check.interval.ms", 600000, _int(1), "How often offsets expire."),
    Definition("offsets.commit.timeout.ms", 5000, _int(1), "Longest wait for an offsets-log append."),
    Definition("offset.metadata.max.bytes", 4096, _int(0), "Largest commit metadata string."),
    # transaction coordinator (__transaction_state)
    Definition(
        "transaction.state.log.num.partitions", 50, _int(1, 1000), "Partitions of __transaction_state."
    ),
    Definition(
        "transaction.state.log.segment.bytes", 104857600, _int(14), "Segment size of __transaction_state."
    ),
    Definition(
        "transaction.max.timeout.ms",
        900000,
        _int(1),
        "Longest transaction.timeout.ms a producer may ask for.",
    ),
    Definition(
        "transactional.id.expiration.ms",
        604800000,
        _int(1),
        "An idle transactional id is removed after this.",
    ),
    Definition(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        10000,
        _int(1),
        "How often transactions past their timeout are aborted.",
    ),
    Definition(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        3600000,
        _int(1),
        "How often expired transactional ids are removed.",
    ),
    Definition("group.min.session.timeout.ms", 6000, _int(1), "Smallest session timeout a member may ask."),
    Definition("group.max.session.timeout.ms", 1800000, _int(1), "Largest session timeout a member may ask."),
    Definition("group.initial.rebalance.delay.ms", 3000, _int(0), "Wait for more members of a new group."),
    Definition("group.max.size", 2147483647, _int(1), "Most members a group may have."),
    Definition(
        "group.coordinator.rebalance.protocols",
        "classic,consumer",
        _list,
        "Group protocols served; without consumer, KIP-848's APIs are not offered.",
    ),
    Definition(
        "group.consumer.session.timeout.ms", 45000, _int(1), "Session timeout of consumer group members."
    ),
    Definition(
        "group.consumer.heartbeat.interval.ms", 5000, _int(1), "Heartbeat interval of consumer groups."
    ),
    Definition(
        "group.consumer.assignors", "uniform,range", _list, "Server assignors; the first is the default."
    ),
    Definition(
        "group.consumer.migration.policy",
        "bidirectional",
        _choice("disabled", "upgrade", "downgrade", "bidirectional"),
        "Online migration: upgrade (a classic group becomes a consumer group when a consumer-protocol"
        " member joins), downgrade (back when its last consumer-protocol member leaves), both, or none.",
    ),
    # share groups (KIP-932), Kafka 4.2's names and defaults
    Definition("group.share.session.timeout.ms", 45000, _int(1), "Session timeout of share group members."),
    Definition("group.share.heartbeat.interval.ms", 5000, _int(1), "Heartbeat interval of share groups."),
    Definition("group.share.max.size", 200, _int(1), "Most members a share group may have."),
    Definition(
        "group.share.record.lock.duration.ms", 30000, _int(1000), "How long an acquired record stays locked."
    ),
    Definition(
        "group.share.delivery.count.limit", 5, _int(2, 10), "Deliveries of a record before it is archived."
    ),
    Definition(
        "group.share.partition.max.record.locks", 2000, _int(100), "In-flight records per share partition."
    ),
    Definition("group.share.max.share.sessions", 2000, _int(1), "Share sessions open on this node at once."),
    Definition(
        "share.coordinator.state.topic.num.partitions", 50, _int(1), "Partitions of __share_group_state."
    ),
    Definition(
        "share.coordinator.snapshot.update.records.per.snapshot",
        500,
        _int(0),
        "ShareUpdate records of a share partition between two ShareSnapshots.",
    ),
    Definition(
        "share.coordinator.state.topic.prune.interval.ms",
        300000,
        _int(1),
        "How often the records of __share_group_state a newer snapshot made redundant are deleted.",
    ),
    Definition(
        "share.coordinator.cold.partition.snapshot.interval.ms",
        300000,
        _int(1),
        "How old a share partition's latest snapshot may grow before a new one is written.",
    ),
    # authorization
    Definition(
        "authorizer.class.name",
        "",
        _authorizer_class,
        "Empty: no authorizer (all allowed); else ACLs decide.",
    ),
    Definition("super.users", "", _principals, "Principals allowed everything: User:alice;User:bob."),
    Definition(
        "allow.everyone.if.no.acl.found", False, _bool, "With an authorizer: allow what no ACL applies to."
    ),
    # kcoord's own
    Definition(
        "kcoord.metrics.listen", "127.0.0.1:9644", parse_host_port, "HTTP listener for /metrics and /v1."
    ),
    Definition(
        "kcoord.metrics.ssl.enable", False, _bool, "Serve /metrics and /v1 over TLS (the ssl.keystore.* key)."
    ),
    Definition(
        "kcoord.metrics.auth.users",
        "",
        _list,
        "Users (SCRAM credentials) allowed on /metrics and /v1 with HTTP Basic auth; empty: no auth.",
    ),
    Definition("kcoord.log.format", "json", _choice("json", "console"), "Log renderer."),
    Definition("kcoord.log.level", "info", _choice("debug", "info", "warning", "error"), "Log level."),
    Definition(
        "kcoord.shutdown.timeout.ms", 10000, _int(0), "Longest drain of in-flight requests on SIGTERM."
    ),
    Definition(
        "kcoord.fast.failover.enable", True, _bool, "Shorten a dead dynamic member's session on disconnect."
    ),
    Definition("kcoord.lag.max.series", 10000, _int(0), "Cap on consumer-lag metric series."),
    Definition(
        "kcoord.storage.url",
        "",
        _str,
        "Log engine: file:///path, memory:// or postgresql://user@host:port/db (password from PGPASSWORD"
        " or PGPASSFILE); empty: file:// under log.dirs.",
    ),
    Definition(
        "kcoord.storage.postgres.cache.bytes",
        256 * 1024 * 1024,
        _int(0),
        "postgresql:// engine: bytes of recent batches kept in memory (the rest is read from the database).",
    ),
    Definition(
        "kcoord.cluster.enable",
        False,
        _bool,
        "Run as one of several nodes sharing a postgresql:// store (leases, ownership, failover).",
    ),
    Definition(
        "kcoord.node.lease.ms", 6000, _int(1000), "A cluster node is gone once it has not renewed for this."
    ),
    Definition("kcoord.node.lease.renew.ms", 1000, _int(100), "How often a cluster node renews its lease."),
    Definition(
        "kcoord.cluster.state.max.staleness.ms",
        6000,
        _int(200),
        "Cluster mode: how old a node's copy of the shared ACLs and SCRAM users may grow (the database"
        " unreachable) before it refuses authorization (REQUEST_TIMED_OUT) and SASL logins instead.",
    ),
)

BY_NAME: dict[str, Definition] = {d.name: d for d in DEFINITIONS}
