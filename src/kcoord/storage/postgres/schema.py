"""The engine's tables, created and migrated at start from versioned steps in ``schema_migrations``.

A migration is applied once, in its own transaction, under an advisory lock, so several nodes
starting together against one database migrate it exactly once. New steps are appended to
:data:`MIGRATIONS`; a step already applied is never edited.

``log_partitions.owner_epoch`` is where fencing lives: a node writes a partition only while the
epoch it was granted still matches, checked inside the append transaction (see
:mod:`kcoord.storage.postgres.committer`). Version 2 adds the nodes of a cluster (``cluster_nodes``,
each with a lease on the database's clock) and the owner of each partition (``owner_node``; see
:mod:`kcoord.storage.postgres.ownership`). Version 5 adds the topic catalogue every node shares
(``topic_catalogue``, with a ``topic_catalogue_version`` that every change bumps; see
:mod:`kcoord.storage.postgres.catalogue`); it adopts the topics found in ``log_partitions`` with
fresh random ids (an id whose base64 form would start with ``-``, which Kafka never issues, gets
its first digit replaced). Version 6 records where each owner epoch (each partition's leader
epoch) starts in the log, which OffsetForLeaderEpoch answers from. Version 7 adds what
idempotent producers need across nodes (:mod:`kcoord.storage.postgres.producer_ids`,
:mod:`kcoord.storage.postgres.producer_snapshots`). Version 8 keeps the dynamic broker configs every
node applies (:mod:`kcoord.storage.postgres.broker_configs`). Version 9 adds the security state every
node shares (:mod:`kcoord.storage.postgres.shared_documents`). Version 10 records which process
(a random incarnation id) registered each node id, so a process whose id was taken over cannot renew it.
"""

from __future__ import annotations

from typing import TypeAlias

import asyncpg
import asyncpg.pool
import structlog

__all__ = ["MIGRATIONS", "Connection", "migrate"]

Connection: TypeAlias = "asyncpg.Connection | asyncpg.pool.PoolConnectionProxy"
"""A connection of its own or one borrowed from the pool."""

logger = structlog.get_logger(__name__)

_LOCK_KEY = 0x6B636F6F7264  # "kcoord": the advisory lock serialising migrations

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "partition logs: partitions, segments, batches",
        """
        CREATE TABLE log_partitions (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            owner_epoch bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (topic, partition_id)
        );
        CREATE TABLE log_segments (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            base_offset bigint NOT NULL,
            created_ms bigint NOT NULL,
            PRIMARY KEY (topic, partition_id, base_offset),
            FOREIGN KEY (topic, partition_id) REFERENCES log_partitions ON DELETE CASCADE
        );
        CREATE TABLE log_batches (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            base_offset bigint NOT NULL,
            last_offset bigint NOT NULL,
            max_timestamp bigint NOT NULL,
            size integer NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (topic, partition_id, base_offset),
            FOREIGN KEY (topic, partition_id) REFERENCES log_partitions ON DELETE CASCADE
        );
        ALTER TABLE log_batches ALTER COLUMN data SET STORAGE EXTERNAL;
        """,
    ),
    (
        2,
        "cluster: nodes with leases, partition owners",
        """
        CREATE TABLE cluster_nodes (
            node_id integer PRIMARY KEY,
            host text NOT NULL,
            port integer NOT NULL,
            lease_expires_at timestamptz NOT NULL,
            registered_at timestamptz NOT NULL DEFAULT now()
        );
        ALTER TABLE log_partitions ADD COLUMN owner_node integer;
        CREATE TABLE cluster_meta (
            key text PRIMARY KEY,
            value text NOT NULL
        );
        """,
    ),
    (
        3,
        "cluster: every change of a partition's owner",
        """
        CREATE TABLE ownership_moves (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            epoch bigint NOT NULL,
            node_id integer NOT NULL,
            previous_node integer,
            moved_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (topic, partition_id, epoch)
        );
        """,
    ),
    (
        4,
        "partition logs: the log start offset DeleteRecords moved (null: the first batch's offset)",
        """
        ALTER TABLE log_partitions ADD COLUMN log_start_offset bigint;
        """,
    ),
    (
        5,
        "cluster: the shared topic catalogue, adopting the topics the logs already hold",
        """
        CREATE TABLE topic_catalogue (
            name text PRIMARY KEY,
            topic_id uuid NOT NULL UNIQUE,
            partitions integer NOT NULL CHECK (partitions > 0),
            configs jsonb NOT NULL DEFAULT '{}'::jsonb,
            internal boolean NOT NULL DEFAULT false,
            version bigint NOT NULL
        );
        CREATE TABLE topic_catalogue_version (
            single_row boolean PRIMARY KEY DEFAULT true CHECK (single_row),
            version bigint NOT NULL
        );
        INSERT INTO topic_catalogue_version (version) VALUES (1);
        INSERT INTO topic_catalogue (name, topic_id, partitions, configs, internal, version)
        SELECT topic,
               CASE WHEN left(id::text, 2) IN ('f8', 'f9', 'fa', 'fb')
                    THEN ('7' || substr(id::text, 2))::uuid ELSE id END,
               partitions,
               CASE WHEN topic = '__consumer_offsets'
                    THEN '{"cleanup.policy": "compact"}'::jsonb ELSE '{}'::jsonb END,
               topic = '__consumer_offsets',
               1
        FROM (
            SELECT topic, max(partition_id) + 1 AS partitions, gen_random_uuid() AS id
            FROM log_partitions GROUP BY topic
        ) AS found;
        """,
    ),
    (
        6,
        "cluster: where each leader epoch of a partition starts (KIP-101's leader epoch cache)",
        """
        CREATE TABLE leader_epochs (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            epoch bigint NOT NULL,
            start_offset bigint NOT NULL,
            PRIMARY KEY (topic, partition_id, epoch),
            FOREIGN KEY (topic, partition_id) REFERENCES log_partitions ON DELETE CASCADE
        );
        """,
    ),
    (
        7,
        "idempotent producers: the cluster's producer id counter, each partition's producer snapshot",
        """
        CREATE TABLE producer_id_blocks (
            singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
            next_id bigint NOT NULL
        );
        CREATE TABLE producer_snapshots (
            topic text NOT NULL,
            partition_id integer NOT NULL,
            snapshot_offset bigint NOT NULL,
            owner_epoch bigint NOT NULL,
            data bytea NOT NULL,
            written_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (topic, partition_id),
            FOREIGN KEY (topic, partition_id) REFERENCES log_partitions ON DELETE CASCADE
        );
        """,
    ),
    (
        8,
        "dynamic broker configs shared by the nodes",
        """
        CREATE TABLE broker_configs (
            resource_name text NOT NULL,
            name text NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (resource_name, name)
        );
        """,
    ),
    (
        9,
        "cluster: shared security state (ACLs, SCRAM credentials, group configs), one document each",
        """
        CREATE TABLE shared_documents (
            kind text PRIMARY KEY,
            document jsonb NOT NULL,
            version bigint NOT NULL
        );
        """,
    ),
    (
        10,
        "cluster: the incarnation (the process) that registered each node id",
        """
        ALTER TABLE cluster_nodes ADD COLUMN incarnation uuid;
        """,
    ),
]


async def migrate(connection: Connection) -> int:
    """Apply every migration not yet recorded; return the schema version now in place."""
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
        await connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                description text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """
        )
        applied = {row["version"] for row in await connection.fetch("SELECT version FROM schema_migrations")}
        for version, description, sql in MIGRATIONS:
            if version in applied:
                continue
            await connection.execute(sql)
            await connection.execute(
                "INSERT INTO schema_migrations (version, description) VALUES ($1, $2)", version, description
            )
            logger.info("postgres.migrated", version=version, description=description)
    return max(version for version, _, _ in MIGRATIONS)
