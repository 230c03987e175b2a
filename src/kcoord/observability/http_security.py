"""TLS and HTTP Basic authentication for the observability endpoint, from the settings.

``kcoord.metrics.ssl.enable`` serves it over TLS with the Kafka listeners' key and chain;
``kcoord.metrics.auth.users`` lets in only those users, with their SCRAM password. Refusals are
logged, counted and delayed like failed SASL logins (listener ``http``, mechanism ``BASIC``,
``connection.failed.authentication.delay.ms``).
"""

from __future__ import annotations

import ssl
from typing import TypedDict

import structlog

from kcoord.config import Settings, SettingsError
from kcoord.observability.auth_metrics import AuthMetrics
from kcoord.observability.http import Authorize
from kcoord.security.basic_auth import BasicAuthenticator
from kcoord.security.credentials import CredentialStore
from kcoord.security.tls import TlsConfigError, server_context

log = structlog.get_logger(__name__)


class HttpSecurity(TypedDict):
    ssl_context: ssl.SSLContext | None
    authorize: Authorize | None


def http_security(settings: Settings, store: CredentialStore, metrics: AuthMetrics) -> HttpSecurity:
    context = None
    if settings["kcoord.metrics.ssl.enable"]:
        try:
            context = server_context(settings, with_client_auth=False)
        except TlsConfigError as exc:
            raise SettingsError(f"kcoord.metrics.ssl.enable: {exc}") from exc
    users = settings["kcoord.metrics.auth.users"]

    def refused(user: str | None) -> None:
        metrics.failure("http", "BASIC")
        log.warning("http.authentication_failed", user=user)

    delay_s = settings["connection.failed.authentication.delay.ms"] / 1000
    authorize = BasicAuthenticator(store, users, refused, failure_delay_s=delay_s) if users else None
    return {"ssl_context": context, "authorize": authorize}
