"""Kafka principals: ``User:alice``, and ``User:ANONYMOUS`` for a connection that proved nothing.

A principal is what authentication yields (the SASL user name, or the subject of a client
certificate) and what authorization decides on; Kafka writes it as ``TYPE:NAME``.
"""

from __future__ import annotations

from dataclasses import dataclass

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> KafkaPrincipal("User", "alice"); raises ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not of the form TYPE:NAME")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
"""The principal of a connection that did not authenticate (PLAINTEXT, SSL without a client certificate)."""
