"""Which settings hold secrets, and how they are shown where settings are shown.

Kafka marks password-type configs sensitive and never returns their values; kcoord does the same
in ``kcoord config show``, DescribeConfigs and its messages. A secret setting (a password, a
private key, a JAAS configuration) is hidden whole; a URL setting keeps everything but its
password, so that an operator still sees which database a node uses.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["HIDDEN", "is_secret", "redact_url", "shown_setting"]

HIDDEN = "[hidden]"

_SECRET_NAMES = frozenset({"ssl.keystore.key"})
_SECRET_SUFFIXES = (".password", ".jaas.config")
_URL_SETTINGS = frozenset({"kcoord.storage.url"})
_SECRET_QUERY_KEYS = frozenset({"password", "sslpassword"})


def is_secret(name: str) -> bool:
    """True for a setting whose whole value is secret (Kafka's PASSWORD type)."""
    return name in _SECRET_NAMES or name.endswith(_SECRET_SUFFIXES)


def redact_url(url: str) -> str:
    """``url`` with the password of its user part and of its query (libpq's ``?password=``) hidden."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return HIDDEN
    netloc = parts.netloc
    if "@" in netloc:
        user_info, host = netloc.rsplit("@", 1)
        if ":" in user_info:
            netloc = f"{user_info.split(':', 1)[0]}:{HIDDEN}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key.lower() in _SECRET_QUERY_KEYS for key, _ in pairs):
            query = urlencode(
                [(key, HIDDEN if key.lower() in _SECRET_QUERY_KEYS else value) for key, value in pairs],
                safe="[]",
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def shown_setting(name: str, value: Any) -> Any:
    """``value`` as it may be shown: a set secret is :data:`HIDDEN`, a URL loses its password."""
    if is_secret(name):
        return HIDDEN if value not in (None, "") else value
    if name in _URL_SETTINGS and isinstance(value, str):
        return redact_url(value)
    return value
