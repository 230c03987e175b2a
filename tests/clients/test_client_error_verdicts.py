"""The verdicts of tests/support/client_errors.py: what counts as a retriable client error."""

from __future__ import annotations

import kafka.errors
import pytest
from confluent_kafka import KafkaError as ConfluentError

from tests.support.client_errors import ClientError, ErrorLog, watching_kafka_python


def test_broker_codes_follow_kafkas_list_whatever_the_client_says() -> None:
    """A Kafka error code is judged by Kafka's list, not by the client's own flag."""
    assert ClientError("confluent", "commit", "NOT_COORDINATOR", 16, False).retriable
    assert ClientError("kafka-python", "response", "KafkaStorageError", 56, True).retriable
    assert not ClientError("confluent", "commit", "UNKNOWN_SERVER_ERROR", -1, True).retriable
    assert not ClientError("kafka-python", "commit", "RebalanceInProgressError", 27, True).retriable
    assert not ClientError("confluent", "message", "GROUP_AUTHORIZATION_FAILED", 30, False).retriable


def test_local_errors_follow_kafkas_equivalent_or_the_clients_flag() -> None:
    """librdkafka's transport failure is Kafka's NETWORK_EXCEPTION; others keep the client's flag."""
    transport = ConfluentError(ConfluentError._TRANSPORT)
    log = ErrorLog()
    log.confluent("error_cb", transport)
    log.confluent("error_cb", ConfluentError(ConfluentError._ALL_BROKERS_DOWN))
    log.exception("kafka-python", "commit", kafka.errors.CommitFailedError())
    log.exception("kafka-python", "send", kafka.errors.KafkaTimeoutError())
    verdicts = {error.name: error.retriable for error in log.errors}
    assert verdicts == {
        "_TRANSPORT": True,
        "_ALL_BROKERS_DOWN": False,
        "CommitFailedError": False,
        "KafkaTimeoutError": True,
    }
    with pytest.raises(AssertionError, match="_ALL_BROKERS_DOWN"):
        log.assert_only_retriable()


def test_kafka_python_response_codes_are_seen_and_the_library_is_restored() -> None:
    """Every non-zero code kafka-python converts is recorded; the original function comes back."""
    log = ErrorLog()
    original = kafka.errors.for_code
    with watching_kafka_python(log):
        assert kafka.errors.for_code(0) is kafka.errors.NoError
        assert kafka.errors.for_code(16) is kafka.errors.NotCoordinatorError
    assert kafka.errors.for_code is original
    assert [(e.client, e.where, e.code, e.retriable) for e in log.errors] == [
        ("kafka-python", "response", 16, True)
    ]
