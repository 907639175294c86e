"""`watch --sign-in FILE` at start: the file checked against its provider, and Streamlit's own
login configured from it.

Streamlit reads its OpenID Connect client from the `[auth]` section of a secrets file; this
module writes that file (0600, in the data directory, removed at exit) from the sign-in file,
so the operator keeps one file of groupscope's format and the client secret in a file of its
own. The cookie that keeps a browser signed in is signed with a key kept beside it (0600, made
once), so a restart of `watch` does not sign everyone out.

Before anything is served, the provider's discovery document is fetched: a provider that
cannot be reached, or that names another issuer than the file (OpenID Connect Discovery
requires them to be equal), stops the start with one line instead of a login that fails in
every browser later.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.contracts.signin import SignIn, SignInError, load_sign_in
from backend.errors import one_line
from backend.paths import write_private

COOKIE_KEY_FILE = "signin-cookie.key"
SECRETS_FILE = "signin-secrets.toml"
DISCOVERY_TIMEOUT_S = 10.0


def check_provider(sign_in: SignIn, timeout_s: float = DISCOVERY_TIMEOUT_S) -> None:
    """The provider answers its discovery document and calls itself the file's issuer."""
    url = sign_in.metadata_url
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as answer:
            document = json.loads(answer.read(1 << 20))
    except urllib.error.HTTPError as exc:
        raise SignInError(f"{url} answered HTTP {exc.code}: is [oidc] issuer "
                          f"{sign_in.issuer} the provider's issuer URL?") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise SignInError(f"cannot reach the sign-in provider at {url} "
                          f"({one_line(exc)}): check [oidc] issuer and the network") from None
    except ValueError:
        raise SignInError(f"{url} is not an OpenID Connect discovery document (not JSON): "
                          f"check [oidc] issuer") from None
    named = str(document.get("issuer", "")).rstrip("/") if isinstance(document, dict) else ""
    if named != sign_in.issuer:
        raise SignInError(f"the provider at {url} calls itself {named or 'nothing'}, not "
                          f"{sign_in.issuer}: set [oidc] issuer to exactly its issuer")


def cookie_key(data: Path) -> str:
    """The key signing the sign-in cookie: made once, kept 0600 in the data directory."""
    path = data / COOKIE_KEY_FILE
    try:
        key = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        key = ""
    if len(key) < 32:
        key = secrets.token_urlsafe(48)
        data.mkdir(parents=True, exist_ok=True)
        write_private(path, key + "\n")
    return key


def _toml(table: dict[str, object], name: str) -> list[str]:
    """Strings and nested tables only; JSON's string escapes are TOML's basic strings'."""
    lines, nested = [f"[{name}]"], []
    for key, value in table.items():
        if isinstance(value, dict):
            nested += ["", *_toml(value, f"{name}.{key}")]
        else:
            lines.append(f"{key} = {json.dumps(str(value))}")
    return lines + nested


@contextmanager
def streamlit_secrets(path: Path, data: Path) -> Iterator[tuple[SignIn, Path]]:
    """The sign-in file loaded and checked, and Streamlit's secrets file for it while the
    block runs (removed after: it holds a copy of the client secret)."""
    sign_in = load_sign_in(path)
    auth = sign_in.streamlit_auth(cookie_key(data))  # reads the client secret: fails early
    check_provider(sign_in)
    secrets_path = data / SECRETS_FILE
    write_private(secrets_path, "\n".join(_toml(auth, "auth")) + "\n")
    try:
        yield sign_in, secrets_path
    finally:
        secrets_path.unlink(missing_ok=True)
