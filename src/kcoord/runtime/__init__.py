"""The shell that runs the pure coordinator core: one coordinator runtime for every coordinator type
(:mod:`.coordinator_type`), one serial runner per partition of its topic, loading, appends and their
completion, and the asyncio driver of the timing wheel. The group coordinator is its first instance
(:mod:`.group_coordinator`)."""
