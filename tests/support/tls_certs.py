"""A throwaway PKI for TLS tests, made at test time with the ``openssl`` command: a CA, a server
certificate for ``localhost`` / 127.0.0.1 and client certificates, all PEM files."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    client_subject: str
    """The client certificate's subject as Kafka writes it (RFC 2253, most specific first)."""

    def server_keystore(self) -> Path:
        """One PEM file with the server's key and certificate (``ssl.keystore.location``)."""
        path = self.server_key.with_name("server-keystore.pem")
        path.write_text(self.server_key.read_text() + self.server_cert.read_text())
        return path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _leaf(directory: Path, name: str, subject: str, extensions: str) -> tuple[Path, Path]:
    key, csr, cert, ext = (directory / f"{name}{s}" for s in (".key", ".csr", ".pem", ".ext"))
    ext.write_text(extensions)
    _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key.name, "-out", csr.name,
             "-subj", subject, cwd=directory)  # fmt: skip
    _openssl("x509", "-req", "-in", csr.name, "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", cert.name, "-days", "2", "-sha256", "-extfile", ext.name, cwd=directory)  # fmt: skip
    return cert, key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=kcoord test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)  # fmt: skip
    server_cert, server_key = _leaf(
        directory,
        "server",
        "/CN=localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    client_cert, client_key = _leaf(
        directory, "client", "/O=kcoord/OU=eng/CN=alice", "extendedKeyUsage=clientAuth\n"
    )
    return Pki(
        ca_cert=directory / "ca.pem",
        server_cert=server_cert,
        server_key=server_key,
        client_cert=client_cert,
        client_key=client_key,
        client_subject="CN=alice,OU=eng,O=kcoord",
    )
