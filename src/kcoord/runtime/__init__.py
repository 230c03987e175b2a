"""The shell that runs the pure coordinator core: one serial runner per offsets-log partition,
loading, appends and their completion, and the asyncio driver of the timing wheel."""
