"""Consumer groups of KIP-848: the coordinator computes the assignment, members reconcile to it.

Pure like the classic groups: no asyncio, no storage, no metrics. :mod:`.manager` handles
ConsumerGroupHeartbeat and the timers, :mod:`.group` holds one group's epochs and assignments,
:mod:`.reconcile` moves one member towards its target assignment.
"""
