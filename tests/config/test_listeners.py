"""Kafka's listener settings: names, protocols, the protocol map, and the bare HOST:PORT form."""

from __future__ import annotations

import pytest

from kcoord.config import Settings, SettingsError
from kcoord.config.listeners import ListenerAddress, security_protocol_of


def test_several_listeners_and_a_named_one() -> None:
    """Each entry keeps its name, host and port; a mapped name resolves to its protocol."""
    s = Settings.load(
        environ={},
        flags={
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093,internal://[::1]:9094",
            "listener.security.protocol.map": "INTERNAL:SSL,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        },
    )
    assert s["listeners"] == (
        ListenerAddress("PLAINTEXT", "127.0.0.1", 9092),
        ListenerAddress("SASL_SSL", "0.0.0.0", 9093),
        ListenerAddress("INTERNAL", "::1", 9094),
    )
    assert security_protocol_of("INTERNAL", s["listener.security.protocol.map"]) == "SSL"
    assert security_protocol_of("SASL_SSL", {}) == "SASL_SSL"
    with pytest.raises(ValueError, match=r"protocol\.map"):
        security_protocol_of("EXTERNAL", s["listener.security.protocol.map"])


def test_bare_address_is_the_plaintext_listener() -> None:
    """``--listen HOST:PORT`` keeps meaning one PLAINTEXT listener."""
    s = Settings.load(environ={}, flags={"listeners": "127.0.0.1:0"})
    assert s["listeners"] == (ListenerAddress("PLAINTEXT", "127.0.0.1", 0),)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("listeners", "PLAINTEXT://h:1,PLAINTEXT://h:2"),
        ("listeners", "SSL://nohost"),
        ("listener.security.protocol.map", "INTERNAL:TLS"),
    ],
)
def test_bad_listener_settings_are_refused(name: str, value: str) -> None:
    """A repeated name, a missing port or an unknown protocol stops the start naming the setting."""
    with pytest.raises(SettingsError, match=name):
        Settings.load(environ={}, flags={name: value})
