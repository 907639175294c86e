"""A real OpenID Connect provider for the sign-in tests, run locally: oidc-provider-mock
(Authlib's provider, its own login form, any client id), and a sign-in file naming it."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.netutil import free_port, wait_until
from backend.proc import abort_if_exited, spawn, terminate

VIEWERS, OPERATORS = "kafka-viewers", "kafka-operators"


@contextmanager
def oidc_provider(log_path: Path) -> Iterator[str]:
    """oidc-provider-mock on a free loopback port; yields its issuer URL; always stopped."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = spawn([sys.executable, "-m", "oidc_provider_mock", "--port", str(port),
                      "--host", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT,
                     start_new_session=True)
    try:
        def answering() -> bool:
            try:
                with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration",
                                            timeout=2) as answer:
                    return json.loads(answer.read())["issuer"] == issuer
            except OSError:
                return False

        wait_until(answering, 60, what="the OIDC provider's discovery document",
                   abort=abort_if_exited(proc, "oidc-provider-mock",
                                         lambda: f"; see {log_path}", AssertionError))
        yield issuer
    finally:
        terminate(proc, 10, group=True)


def sign_in_file(folder: Path, issuer: str) -> Path:
    (folder / "oidc-secret").write_text("any-secret-the-mock-takes\n")
    path = folder / "signin.toml"
    path.write_text(f"""
[oidc]
issuer = "{issuer}"
client_id = "groupscope"
client_secret_file = "oidc-secret"
redirect_uri = "http://127.0.0.1:{{port}}/oauth2callback"
allowed_domains = ["example.com"]

[roles]
claim = "groups"
operator = ["{OPERATORS}"]
viewer = ["{VIEWERS}"]
""")
    return path
