"""The group APIs at the edge: kio requests in, version-neutral calls to the coordinator, responses out."""
