"""The sign-in file: what it accepts, the one line it gives for what it does not, and whom it
lets in as what (pure: claims in, admission out)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from backend.contracts.signin import (
    EXPIRY_LEEWAY_S,
    Role,
    SignInError,
    load_sign_in,
    parse_sign_in,
)
from backend.stack.signin import _toml, cookie_key

ISSUER = "https://login.example.com/realms/ops"
GOOD = {
    "oidc": {"issuer": ISSUER + "/", "client_id": "groupscope",
             "client_secret_file": "oidc-secret",
             "redirect_uri": "https://gs.example.com:8501/oauth2callback",
             "allowed_domains": ["Example.com"]},
    "roles": {"claim": "groups", "operator": ["kafka-operators"], "viewer": ["kafka-viewers"]},
}
NOW = 1_800_000_000.0


def _with(section: str, **changes: object) -> dict:
    data = {k: dict(v) for k, v in GOOD.items()}
    for key, value in changes.items():
        if value is None:
            data[section].pop(key, None)
        else:
            data[section][key] = value
    return data


def test_a_good_file_parses_with_the_issuer_normalised_and_the_secret_file_beside_it(
        tmp_path: Path) -> None:
    source = tmp_path / "signin.toml"
    s = parse_sign_in(GOOD, source)
    assert s.issuer == ISSUER
    assert s.metadata_url == ISSUER + "/.well-known/openid-configuration"
    assert s.client_secret_file == tmp_path / "oidc-secret"
    assert s.allowed_domains == ("example.com",)
    assert s.operators == ("kafka-operators",) and s.viewers == ("kafka-viewers",)


@pytest.mark.parametrize(("data", "names"), [
    (_with("oidc", issuer=None), "[oidc] needs issuer"),
    (_with("oidc", issuer="login.example.com"), "is not a URL"),
    (_with("oidc", redirect_uri="https://gs.example.com/callback"), "/oauth2callback"),
    (_with("oidc", client_secret="hunter2"), "unknown key(s) client_secret"),
    (_with("oidc", scopes="email profile"), "must include openid"),
    (_with("roles", operator=[]), "[roles] operator names no group"),
    (_with("roles", viewer=[1, 2]), "viewer must be a list of names"),
    ({"oidc": GOOD["oidc"]}, "no [roles] section"),
    ({**GOOD, "ldap": {}}, "unknown section(s) ldap"),
])
def test_a_bad_file_is_one_line_naming_what_to_fix(data: dict, names: str) -> None:
    with pytest.raises(SignInError) as caught:
        parse_sign_in(data)
    assert names in str(caught.value)
    assert "\n" not in str(caught.value)


def test_an_unreadable_or_broken_file_and_a_missing_secret_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SignInError, match="cannot be read"):
        load_sign_in(tmp_path / "nope.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text("[oidc\nissuer = 1\n")
    with pytest.raises(SignInError, match="is not TOML"):
        load_sign_in(broken)
    s = parse_sign_in(GOOD, tmp_path / "signin.toml")
    with pytest.raises(SignInError, match=r"client_secret_file .* cannot be read"):
        s.client_secret()
    (tmp_path / "oidc-secret").write_text("\n")
    with pytest.raises(SignInError, match="is empty"):
        s.client_secret()


def _claims(**changes: object) -> dict:
    claims = {"iss": ISSUER, "exp": NOW + 3600, "sub": "u1", "email": "ann@example.com",
              "email_verified": True, "groups": ["kafka-viewers"]}
    claims.update(changes)
    return {k: v for k, v in claims.items() if v is not None}


S = parse_sign_in(GOOD)


@pytest.mark.parametrize(("claims", "role", "why"), [
    (_claims(), Role.VIEWER, ""),
    (_claims(groups=["kafka-viewers", "kafka-operators"]), Role.OPERATOR, ""),
    (_claims(groups="kafka-operators"), Role.OPERATOR, ""),  # one role as a string
    (_claims(iss=ISSUER + "/"), Role.VIEWER, ""),  # a trailing slash is the same issuer
    (_claims(iss="https://evil.example.net"), None, "trusts only " + ISSUER),
    (_claims(iss=None), None, "signed in by an unknown issuer"),
    (_claims(exp=NOW - EXPIRY_LEEWAY_S - 1), None, "your sign-in has expired"),
    (_claims(exp=NOW - EXPIRY_LEEWAY_S + 1), Role.VIEWER, ""),  # within the clock skew
    (_claims(exp=None), None, "carries no expiry"),
    (_claims(email="ann@example.org"), None, "ann@example.org is not from example.com"),
    (_claims(email_verified=False), None, "is not from example.com"),
    (_claims(email=None), None, "an account without an e-mail"),
    (_claims(groups=["marketing"]), None, "has none of the roles"),
    (_claims(groups=None), None, "has none of the roles"),
])
def test_who_is_let_in_as_what(claims: dict, role: Role | None, why: str) -> None:
    admission = S.admit(claims, NOW)
    assert admission.role is role
    assert why in admission.why
    assert admission.user == claims.get("email", claims.get("sub"))


def test_without_viewer_groups_everyone_from_the_domain_reads() -> None:
    s = parse_sign_in(_with("roles", viewer=None))
    assert s.admit(_claims(groups=["marketing"]), NOW).role is Role.VIEWER
    assert s.admit(_claims(groups=None), NOW).role is Role.VIEWER


def test_streamlit_gets_one_provider_and_the_secret_stays_0600(tmp_path: Path) -> None:
    (tmp_path / "oidc-secret").write_text("s3cret\n")
    s = parse_sign_in(GOOD, tmp_path / "signin.toml")
    key = cookie_key(tmp_path)
    assert len(key) >= 32 and cookie_key(tmp_path) == key  # made once, then kept
    assert os.stat(tmp_path / "signin-cookie.key").st_mode & 0o777 == 0o600
    auth = s.streamlit_auth(key)
    assert auth["client_secret"] == "s3cret"
    assert auth["server_metadata_url"] == ISSUER + "/.well-known/openid-configuration"
    text = "\n".join(_toml(auth, "auth"))
    assert tomllib.loads(text)["auth"] == auth
