"""kcoord: a Kafka-protocol server built around its consumer-group coordinator."""
