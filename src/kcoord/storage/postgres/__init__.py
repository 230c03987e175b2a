"""The ``postgresql://`` engine: partition logs whose durable copy lives in PostgreSQL.

Every batch is a ``bytea`` row keyed by (topic, partition, base offset), written inside one
transaction per group-commit round (:mod:`.committer`). The log contract reads synchronously, so
each open log also keeps its visible batches in memory, loaded from the database at start
(:mod:`.log`); PostgreSQL is the copy that survives the process and is shared between nodes.
"""

from kcoord.storage.postgres.store import PostgresLogStore

__all__ = ["PostgresLogStore"]
