"""Secrets stay hidden wherever settings are shown: ``kcoord config show`` and the helpers behind it."""

from __future__ import annotations

import subprocess
import sys

from kcoord.config.secrets import HIDDEN, is_secret, redact_url, shown_setting

PASSWORD = "s3cret-pw"


def test_a_url_keeps_everything_but_its_password() -> None:
    """The user part's password and libpq's ``?password=`` are hidden; user, host and database stay."""
    assert redact_url(f"postgresql://kcoord:{PASSWORD}@db.example:5432/kc") == (
        f"postgresql://kcoord:{HIDDEN}@db.example:5432/kc"
    )
    assert redact_url(f"postgresql://db:5432/kc?user=k&password={PASSWORD}&sslmode=require") == (
        f"postgresql://db:5432/kc?user=k&password={HIDDEN}&sslmode=require"
    )
    assert redact_url("postgresql://kcoord@db/kc") == "postgresql://kcoord@db/kc"
    assert redact_url("file:///var/lib/kcoord") == "file:///var/lib/kcoord"


def test_password_type_settings_are_hidden_whole_when_set() -> None:
    """Key passwords, private keys and JAAS configurations are secrets; an unset one shows as empty."""
    assert is_secret("ssl.key.password") and is_secret("ssl.keystore.key")
    assert is_secret("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config")
    assert not is_secret("ssl.keystore.location") and not is_secret("kcoord.storage.url")
    assert shown_setting("ssl.key.password", PASSWORD) == HIDDEN
    assert shown_setting("ssl.key.password", "") == ""
    assert shown_setting("num.partitions", 3) == 3


def test_config_show_prints_no_secret() -> None:
    """``kcoord config show`` names the database and marks secrets set, without printing either password."""
    key = "-----BEGIN PRIVATE KEY-----\nMIIEvQ-not-a-real-key\n-----END PRIVATE KEY-----"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kcoord",
            "config",
            "show",
            "--storage",
            f"postgresql://kcoord:{PASSWORD}@127.0.0.1:5432/kc",
            "--set",
            "ssl.key.password=hunter2-pw",
            "--set",
            f"ssl.keystore.key={key}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    for secret in (PASSWORD, "hunter2-pw", "MIIEvQ"):
        assert secret not in result.stdout + result.stderr
    lines = {line.split(" = ")[0]: line for line in result.stdout.splitlines()}
    assert lines["kcoord.storage.url"].startswith(
        f"kcoord.storage.url = postgresql://kcoord:{HIDDEN}@127.0.0.1"
    )
    assert lines["ssl.key.password"].startswith(f"ssl.key.password = {HIDDEN}")
    assert lines["ssl.keystore.key"].startswith(f"ssl.keystore.key = {HIDDEN}")
