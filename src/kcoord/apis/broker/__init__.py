"""The data-path APIs at the edge: metadata, produce, fetch, list offsets, topic admin."""
