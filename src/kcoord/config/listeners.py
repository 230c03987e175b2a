"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

A listener is ``NAME://HOST:PORT``. Its name is either a security protocol (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL) or any name that ``listener.security.protocol.map`` maps to one, as in
Kafka (``INTERNAL:SASL_SSL``). A bare ``HOST:PORT`` (kcoord's ``--listen`` flag) is the PLAINTEXT
listener, so the single-listener default keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"


@dataclass(frozen=True, slots=True)
class ListenerAddress:
    """One entry of ``listeners`` or ``advertised.listeners``."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"{text!r}: expected HOST:PORT")
    value = int(port)
    if not 0 <= value <= 65535:
        raise ValueError("port must be 0..65535")
    return host.strip("[]"), value


def parse_listener_list(raw: Any) -> tuple[ListenerAddress, ...]:
    """``PLAINTEXT://h:1,SASL_SSL://h:2`` (or a list of such) -> listener addresses, names unique."""
    items = raw if isinstance(raw, list | tuple) else str(raw).split(",")
    found: list[ListenerAddress] = []
    for item in (str(x).strip() for x in items):
        if not item:
            continue
        name, sep, rest = item.partition("://")
        if not sep:
            name, rest = "PLAINTEXT", item
        name = name.strip().upper()
        if not name:
            raise ValueError(f"{item!r}: empty listener name")
        host, port = _host_port(rest)
        if any(existing.name == name for existing in found):
            raise ValueError(f"listener name {name} appears twice")
        found.append(ListenerAddress(name, host, port))
    if not found:
        raise ValueError("no listener given")
    return tuple(found)


def parse_optional_listener_list(raw: Any) -> tuple[ListenerAddress, ...] | None:
    if raw is None or str(raw).strip() == "":
        return None
    return parse_listener_list(raw)


def parse_protocol_map(raw: Any) -> Mapping[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}; every protocol must be one Kafka knows."""
    items = (
        raw.items()
        if isinstance(raw, Mapping)
        else (
            str(entry).split(":", 1)
            for entry in (raw if isinstance(raw, list | tuple) else str(raw).split(","))
            if str(entry).strip()
        )
    )
    mapping: dict[str, str] = {}
    for pair in items:
        if len(pair) != 2:
            raise ValueError(f"{pair!r}: expected NAME:PROTOCOL")
        name, protocol = str(pair[0]).strip().upper(), str(pair[1]).strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"{name}: unknown security protocol {protocol}")
        mapping[name] = protocol
    return mapping


def security_protocol_of(name: str, protocol_map: Mapping[str, str]) -> str:
    """The security protocol of listener ``name``; an unmapped name that is no protocol is an error."""
    if name in protocol_map:
        return protocol_map[name]
    if name in SECURITY_PROTOCOLS:
        return name
    raise ValueError(f"listener {name} has no entry in listener.security.protocol.map")
