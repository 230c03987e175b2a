"""The transaction coordinator's pure core: ``__transaction_state`` records, states, and the shard.

A transactional id lives on partition ``abs(javaStringHashCode(id)) % partitions`` of
``__transaction_state`` (:func:`partition_for`, the same function as groups use). Its metadata
is one record (:mod:`.records`), its state one of Kafka's eight (:mod:`.state`), and each
partition's ids are one :class:`TransactionCoordinatorShard`, run by the coordinator runtime.
"""

from kcoord.coordinator.partitioner import partition_for
from kcoord.coordinator.transactions import messages
from kcoord.coordinator.transactions.messages import *  # noqa: F403 (its __all__ is re-exported whole)
from kcoord.coordinator.transactions.records import TopicPartition, TransactionRecord
from kcoord.coordinator.transactions.serde import TransactionRecordSerde
from kcoord.coordinator.transactions.shard import TransactionCoordinatorShard
from kcoord.coordinator.transactions.state import TransactionState

TRANSACTION_STATE_TOPIC = "__transaction_state"
TRANSACTION_KEY_TYPE = 1
"""FindCoordinator's ``key_type`` for a transactional id."""
DEFAULT_TRANSACTION_STATE_PARTITIONS = 50
"""``transaction.state.log.num.partitions``."""

__all__ = [
    *messages.__all__,
    "DEFAULT_TRANSACTION_STATE_PARTITIONS",
    "TRANSACTION_KEY_TYPE",
    "TRANSACTION_STATE_TOPIC",
    "TopicPartition",
    "TransactionCoordinatorShard",
    "TransactionRecord",
    "TransactionRecordSerde",
    "TransactionState",
    "partition_for",
]
