"""A kcoord subprocess with SASL_SSL, SSL (mTLS) and PLAINTEXT listeners and SCRAM users.

Certificates come from :mod:`tests.support.tls_certs` (made at test time); users are added with
the ``kcoord users`` command before the server starts, as an operator would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.server import KcoordProcess
from tests.support.tls_certs import Pki, make_pki

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
LISTENERS = "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0"


def add_user(data_dir: Path, name: str, password: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "kcoord",
            "users",
            "add",
            name,
            "--password-stdin",
            "--data-dir",
            str(data_dir),
        ],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )


class SecureKcoord(KcoordProcess):
    """``bootstrap`` is the SASL_SSL listener; ``address(name)`` any listener's."""

    def __init__(self, root: Path) -> None:
        self.pki: Pki = make_pki(root / "pki")
        data_dir = root / "data"
        for name, password in USERS.items():
            add_user(data_dir, name, password)
        super().__init__(
            data_dir,
            {
                "ssl.keystore.location": str(self.pki.server_keystore()),
                "ssl.truststore.location": str(self.pki.ca_cert),
                "ssl.client.auth": "required",
                "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
            },
        )

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--listen") + 1] = LISTENERS
        return cmd

    def address(self, listener: str) -> str:
        started = self.events("kcoord.started")[-1]
        return str(started["listeners"][listener])
