"""kafka-python 2.0.2 over SASL_SSL, run under ``$KCOORD_KP2_PYTHON`` by tests/clients/test_sasl_ssl.py.

kafka-python 2.0.2 sends SaslHandshake v0 and then bare SASL tokens (no SaslAuthenticate):

    kp2_sasl.py '{"bootstrap": ..., "topic": ..., "group": ..., "mechanism": ..., "username": ...,
                  "password": ..., "cafile": ..., "messages": N}'

Produces N values to partition 0, consumes them in the group, commits, and prints
``{"values": [...], "committed": offset}``.
"""

from __future__ import annotations

import json
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def main() -> None:
    config = json.loads(sys.argv[1])
    common = {
        "bootstrap_servers": config["bootstrap"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": config["mechanism"],
        "sasl_plain_username": config["username"],
        "sasl_plain_password": config["password"],
        "ssl_cafile": config["cafile"],
    }
    producer = KafkaProducer(**common)
    for i in range(config["messages"]):
        producer.send(config["topic"], value=f"value-{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        **common,
        group_id=config["group"],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=30000,
    )
    partition = TopicPartition(config["topic"], 0)
    consumer.assign([partition])
    values = []
    for message in consumer:
        values.append(message.value.decode())
        if len(values) == config["messages"]:
            break
    consumer.commit()
    committed = consumer.committed(partition)
    consumer.close()
    print(json.dumps({"values": values, "committed": committed}))


if __name__ == "__main__":
    main()
