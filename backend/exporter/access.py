"""Who may scrape /metrics: TLS, and a basic-auth password or a bearer token, each in a file.

The file names them the way a Prometheus scrape job does on its side (`tls_config`,
`basic_auth.password_file`, `authorization.credentials_file`), so the two read alike:

    [tls]
    cert_file = "/etc/groupscope/metrics.pem"
    key_file = "/etc/groupscope/metrics.key"

    [basic_auth]
    username = "prometheus"
    password_file = "/etc/groupscope/metrics.password"

    # or, instead of basic_auth:
    [authorization]
    credentials_file = "/etc/groupscope/metrics.token"

Relative paths are read against the file's own folder. Secrets are read once, at start; a
request without them gets 401 and nothing else, compared in constant time. No secret is ever
printed, logged or put in an error message: errors name the file and the key to fix.
Written by hand because prometheus_client's server takes TLS but no credentials, and this is
the one WSGI wrapper it needs.
"""

from __future__ import annotations

import base64
import hmac
import ssl
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from backend.cli_common import UserError

REALM = "groupscope metrics"
Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class MetricsAccess:
    """What the metrics server asks of a scraper. `expected` is the whole Authorization header
    a scraper must send, or None for no credentials (TLS alone)."""

    cert_file: Path | None = None
    key_file: Path | None = None
    expected: str | None = field(default=None, repr=False)
    scheme: str | None = None  # "Basic" or "Bearer", for the 401's challenge

    @property
    def tls(self) -> bool:
        return self.cert_file is not None

    def allows(self, header: str | None) -> bool:
        if self.expected is None:
            return True
        return header is not None and hmac.compare_digest(header.encode(),
                                                          self.expected.encode())

    def describe(self) -> str:
        """One line safe to print: what is asked, never what it is."""
        parts = ["TLS"] if self.tls else []
        if self.scheme == "Basic":
            parts.append("basic auth")
        elif self.scheme == "Bearer":
            parts.append("a bearer token")
        return " and ".join(parts) or "nothing"

    def ssl_context(self) -> ssl.SSLContext:
        assert self.cert_file is not None and self.key_file is not None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def guard(self, app: Wsgi) -> Wsgi:
        """`app` behind the credentials check: 401 with a challenge when they are missing or
        wrong, and the app's answer otherwise."""
        if self.expected is None:
            return app

        def guarded(environ: dict[str, Any], start_response: Callable[..., Any]
                    ) -> Iterable[bytes]:
            if self.allows(environ.get("HTTP_AUTHORIZATION")):
                return app(environ, start_response)
            start_response("401 Unauthorized", [
                ("WWW-Authenticate", f'{self.scheme} realm="{REALM}"'),
                ("Content-Type", "text/plain; charset=utf-8")])
            return [b"credentials required\n"]

        return guarded


def load_access(path: str | Path) -> MetricsAccess:
    """The access file, checked whole before anything is served; UserError in one line."""
    path = Path(path)
    where = f"--metrics-access {path}"
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"{where}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where}: not TOML ({exc})") from None
    unknown = set(data) - {"tls", "basic_auth", "authorization"}
    if unknown:
        raise UserError(f"{where}: unknown section(s) {', '.join(sorted(unknown))}; "
                        f"the sections are tls, basic_auth, authorization")
    tables = [name for name in ("tls", "basic_auth", "authorization")
              if name in data and not isinstance(data[name], dict)]
    if tables:
        raise UserError(f"{where}: {', '.join(tables)} must be a [section], not a value")
    if "basic_auth" in data and "authorization" in data:
        raise UserError(f"{where}: give basic_auth or authorization, not both")
    folder = path.parent
    tls = data.get("tls") or {}
    cert = _file(tls, "cert_file", "tls", where, folder) if tls else None
    key = _file(tls, "key_file", "tls", where, folder) if tls else None
    expected, scheme = None, None
    if "basic_auth" in data:
        auth = data["basic_auth"]
        user = auth.get("username")
        if not isinstance(user, str) or not user or ":" in user:
            raise UserError(f"{where}: basic_auth.username must be a name without ':'")
        password = _secret(_file(auth, "password_file", "basic_auth", where, folder),
                           "basic_auth.password_file", where)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        expected, scheme = f"Basic {token}", "Basic"
    elif "authorization" in data:
        auth = data["authorization"]
        kind = auth.get("type", "Bearer")
        if kind != "Bearer":
            raise UserError(f"{where}: authorization.type must be Bearer (got {kind!r})")
        token = _secret(_file(auth, "credentials_file", "authorization", where, folder),
                        "authorization.credentials_file", where)
        expected, scheme = f"Bearer {token}", "Bearer"
    access = MetricsAccess(cert, key, expected, scheme)
    if access.tls:
        try:
            access.ssl_context()
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
            raise UserError(f"{where}: tls.cert_file and tls.key_file are not a usable "
                            f"certificate and key ({reason})") from None
    if access.expected is None and not access.tls:
        raise UserError(f"{where}: names neither tls nor credentials; give at least one")
    return access


def _file(section: dict[str, Any], key: str, name: str, where: str, folder: Path) -> Path:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise UserError(f"{where}: {name}.{key} is missing")
    path = Path(value) if Path(value).is_absolute() else folder / value
    if not path.is_file():
        raise UserError(f"{where}: {name}.{key}: no such file {path}")
    return path


def _secret(path: Path, key: str, where: str) -> str:
    """The file's one line. Never quoted back in an error."""
    try:
        value = path.read_text().strip()
    except OSError as exc:
        raise UserError(f"{where}: {key}: {exc.strerror or exc}") from None
    if not value or "\n" in value:
        raise UserError(f"{where}: {key} must hold one line, the secret alone")
    return value
