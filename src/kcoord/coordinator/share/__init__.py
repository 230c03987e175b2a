"""Share groups (KIP-932): membership, share partitions and their durable state, as pure state machines."""
