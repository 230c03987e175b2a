"""The ``postgresql://`` engine: partition logs whose durable copy lives in PostgreSQL.

Every batch is a ``bytea`` row keyed by (topic, partition, base offset), written inside one
transaction per group-commit round (:mod:`.committer`). Each open log keeps only its batch index
in memory (loaded from the database at start, :mod:`.log`); batch bytes sit in a bounded cache
shared by the store's logs (:mod:`.batch_cache`), and a read that misses it fetches the rows
(``read_async``). PostgreSQL is the copy that survives the process and is shared between nodes.
"""

from kcoord.storage.postgres.store import PostgresLogStore

__all__ = ["PostgresLogStore"]
