"""The sign-in file of `groupscope watch --sign-in FILE`, and who it lets in as what.

`watch` reads the file at start (one-line `SignInError` naming what to fix), hands Streamlit
its own login configuration (OpenID Connect through Authlib), and the dashboard asks
`SignIn.admit` of every session's ID-token claims: the same file, the same rule, in both
processes. The client secret is never in this file: `client_secret_file` names a file that
holds it (0600 and out of version control, like any other key).

    [oidc]
    issuer = "https://login.example.com/realms/ops"
    client_id = "groupscope"
    client_secret_file = "/etc/groupscope/oidc-secret"
    redirect_uri = "https://groupscope.example.com:8501/oauth2callback"
    allowed_domains = ["example.com"]      # optional: e-mail domains let in at all
    scopes = "openid email profile groups" # optional

    [roles]
    claim = "groups"                       # the ID token's claim holding groups or roles
    operator = ["kafka-operators"]         # may also move offsets
    viewer = ["kafka-viewers"]             # optional: without it, everyone let in may read

Why a role comes from a claim and not a user list here: the identity provider already keeps
the team's groups; this file only names which of them mean what.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import urlparse

ENV_SIGN_IN = "GROUPSCOPE_SIGN_IN"  # the sign-in file watch was started with, for the pages
CALLBACK_PATH = "/oauth2callback"  # Streamlit's: the redirect URI must end with it
DEFAULT_SCOPES = "openid email profile"
EXPIRY_LEEWAY_S = 30  # clock skew between the provider and this machine


class Role(Enum):
    VIEWER = "viewer"  # every read page
    OPERATOR = "operator"  # also offset writes


class SignInError(ValueError):
    """The sign-in file cannot be used; the message is one line naming what to fix."""


@dataclass(frozen=True)
class Admission:
    """What a session's claims are let in as: a role, or None and the line saying why not."""

    role: Role | None
    why: str = ""
    user: str = ""  # the name to show and to log: e-mail, else name, else subject


@dataclass(frozen=True)
class SignIn:
    issuer: str
    client_id: str
    client_secret_file: Path
    redirect_uri: str
    allowed_domains: tuple[str, ...] = ()
    scopes: str = DEFAULT_SCOPES
    claim: str = "groups"
    operators: tuple[str, ...] = ()
    viewers: tuple[str, ...] = ()  # empty: every admitted user may read
    source: Path | None = None

    @property
    def metadata_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    def client_secret(self) -> str:
        try:
            secret = self.client_secret_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SignInError(f"{self._where()}: client_secret_file {self.client_secret_file} "
                              f"cannot be read ({exc.strerror or exc}): create it with the "
                              f"client secret the identity provider gave you") from None
        if not secret:
            raise SignInError(f"{self._where()}: client_secret_file {self.client_secret_file} "
                              f"is empty: put the client secret in it")
        return secret

    def streamlit_auth(self, cookie_secret: str) -> dict[str, object]:
        """The `[auth]` section of Streamlit's secrets for this file: one unnamed provider,
        so `st.login()` needs no argument."""
        return {"redirect_uri": self.redirect_uri, "cookie_secret": cookie_secret,
                "client_id": self.client_id, "client_secret": self.client_secret(),
                "server_metadata_url": self.metadata_url,
                "client_kwargs": {"scope": self.scopes}}

    def admit(self, claims: Mapping[str, object], now_s: float) -> Admission:
        """Let a session in by its ID token's claims (Authlib checked their signature): the
        issuer this file trusts, a token not expired, an allowed e-mail domain, a role."""
        user = str(claims.get("email") or claims.get("name") or claims.get("sub") or "")
        iss = str(claims.get("iss") or "").rstrip("/")
        if iss != self.issuer:
            return Admission(None, f"signed in by {iss or 'an unknown issuer'}, but this page "
                                   f"trusts only {self.issuer}", user)
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            return Admission(None, "the sign-in carries no expiry: sign in again", user)
        if exp + EXPIRY_LEEWAY_S < now_s:
            return Admission(None, "your sign-in has expired: sign in again", user)
        if self.allowed_domains:
            email = str(claims.get("email") or "")
            domain = email.rpartition("@")[2].lower() if "@" in email else ""
            if claims.get("email_verified") is False or domain not in self.allowed_domains:
                return Admission(None, f"{email or 'an account without an e-mail'} is not "
                                       f"from {', '.join(self.allowed_domains)}", user)
        held = _values(claims.get(self.claim))
        if held & set(self.operators):
            return Admission(Role.OPERATOR, "", user)
        if not self.viewers or held & set(self.viewers):
            return Admission(Role.VIEWER, "", user)
        return Admission(None, f"{user or 'this account'} has none of the roles of this page "
                               f"(its {self.claim!r} claim names none of "
                               f"{', '.join(self.viewers + self.operators)})", user)

    def _where(self) -> str:
        return str(self.source) if self.source else "sign-in file"


def _values(claim: object) -> set[str]:
    """A claim as a set of names: a list, or one string (some providers send one role)."""
    if isinstance(claim, str):
        return {claim}
    if isinstance(claim, list | tuple):
        return {str(v) for v in claim}
    return set()


def load_sign_in(path: Path) -> SignIn:
    """The file as a `SignIn`, or a `SignInError` naming the line to fix."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SignInError(f"sign-in file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SignInError(f"sign-in file {path} is not TOML: {exc}") from None
    return parse_sign_in(data, path)


def parse_sign_in(data: Mapping[str, object], source: Path | None = None) -> SignIn:
    where = str(source) if source else "sign-in file"
    unknown = set(data) - {"oidc", "roles"}
    if unknown:
        raise SignInError(f"{where}: unknown section(s) {', '.join(sorted(unknown))}: only "
                          f"[oidc] and [roles]")
    oidc, roles = _table(data, "oidc", where), _table(data, "roles", where)
    _only(oidc, {"issuer", "client_id", "client_secret_file", "redirect_uri", "allowed_domains",
                 "scopes"}, "[oidc]", where)
    _only(roles, {"claim", "operator", "viewer"}, "[roles]", where)
    issuer = _text(oidc, "issuer", where, "[oidc]").rstrip("/")
    if urlparse(issuer).scheme not in ("https", "http") or not urlparse(issuer).netloc:
        raise SignInError(f"{where}: [oidc] issuer {issuer!r} is not a URL: give the "
                          f"provider's issuer, e.g. https://login.example.com/realms/ops")
    redirect = _text(oidc, "redirect_uri", where, "[oidc]")
    if not redirect.endswith(CALLBACK_PATH) or not urlparse(redirect).netloc:
        raise SignInError(f"{where}: [oidc] redirect_uri {redirect!r} must be this page's "
                          f"address ending in {CALLBACK_PATH}, e.g. "
                          f"https://groupscope.example.com:8501{CALLBACK_PATH}")
    secret_file = Path(_text(oidc, "client_secret_file", where, "[oidc]")).expanduser()
    if source is not None and not secret_file.is_absolute():
        secret_file = source.parent / secret_file
    operators = _names(roles, "operator", where)
    if not operators:
        raise SignInError(f"{where}: [roles] operator names no group: give the "
                          f"group(s) or role(s) whose members may move offsets")
    scopes = str(oidc.get("scopes", DEFAULT_SCOPES))
    if "openid" not in scopes.split():
        raise SignInError(f"{where}: [oidc] scopes {scopes!r} must include openid")
    return SignIn(issuer=issuer, client_id=_text(oidc, "client_id", where, "[oidc]"),
                  client_secret_file=secret_file, redirect_uri=redirect,
                  allowed_domains=tuple(d.lower().lstrip("@")
                                        for d in _names(oidc, "allowed_domains", where)),
                  scopes=scopes, claim=str(roles.get("claim", "groups")),
                  operators=operators, viewers=_names(roles, "viewer", where), source=source)


def _table(data: Mapping[str, object], key: str, where: str) -> Mapping[str, object]:
    table = data.get(key)
    if not isinstance(table, dict):
        raise SignInError(f"{where}: no [{key}] section")
    return table


def _only(table: Mapping[str, object], known: set[str], section: str, where: str) -> None:
    unknown = set(table) - known
    if unknown:
        raise SignInError(f"{where}: {section} has unknown key(s) {', '.join(sorted(unknown))}"
                          f": known are {', '.join(sorted(known))}")


def _text(table: Mapping[str, object], key: str, where: str, section: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value.strip():
        raise SignInError(f"{where}: {section} needs {key} (a string)")
    return value.strip()


def _names(table: Mapping[str, object], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SignInError(f"{where}: {key} must be a list of names, e.g. {key} = [\"ops\"]")
    return tuple(value)
