"""GET JSON from kcoord's HTTP endpoint (``/v1/...``), secured as the command's client properties say.

The endpoint is not a Kafka listener, but ``--command-config`` describes the same operator: with
``security.protocol`` SSL or SASL_SSL the request goes over https with the properties' CA (and
client certificate), and with ``sasl.username``/``sasl.password`` it carries HTTP Basic credentials,
which is how kcoord checks ``kcoord.metrics.auth.users`` (the user's SCRAM password).
"""

from __future__ import annotations

import base64
import json
import urllib.request
from typing import Any

from kcoord.cli.client_config import ClientSecurity


def url_for(address: str, path: str, security: ClientSecurity) -> str:
    """``address`` is ``HOST:PORT``; the scheme is https when the properties ask for TLS."""
    return f"{'https' if security.tls else 'http'}://{address}{path}"


def get_json(url: str, security: ClientSecurity, timeout_s: float = 10.0) -> Any:
    """The decoded JSON body; urllib's errors (HTTPError, URLError, OSError) and ValueError pass up."""
    request = urllib.request.Request(url)
    if security.username is not None and security.password is not None:
        token = base64.b64encode(f"{security.username}:{security.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=timeout_s, context=security.ssl_context) as reply:
        return json.load(reply)
