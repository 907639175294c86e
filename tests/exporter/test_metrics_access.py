"""/metrics behind TLS and credentials (`--metrics-access FILE`): the file's checks, and a real
`groupscope exporter` scraped over TLS with and without them."""

from __future__ import annotations

import base64
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from backend.cli_common import UserError
from backend.exporter.access import load_access
from backend.netutil import free_port, wait_until
from tests.exporter.conftest import parse
from tests.exporter.test_exporter_live import one_line_error, wait_serving
from tests.tlsutil import make_ca

PASSWORD = "s3cret-scrape-pass"  # the test's own; asserted never to be printed


def access_file(folder: Path, body: str, secret: str = PASSWORD) -> Path:
    (folder / "metrics.password").write_text(secret + "\n")
    (folder / "metrics.token").write_text("tok-" + secret + "\n")
    path = folder / "metrics-access.toml"
    path.write_text(body)
    return path


BASIC = '[basic_auth]\nusername = "prometheus"\npassword_file = "metrics.password"\n'
BEARER = '[authorization]\ncredentials_file = "metrics.token"\n'


def wsgi_call(app, header: str | None) -> tuple[str, dict[str, str], bytes]:
    got: dict = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"], got["headers"] = status, dict(headers)

    environ = {"PATH_INFO": "/metrics", "REQUEST_METHOD": "GET"}
    if header is not None:
        environ["HTTP_AUTHORIZATION"] = header
    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body


def test_basic_auth_and_bearer_let_in_only_the_right_header(tmp_path: Path) -> None:
    def app(_environ, start_response):
        start_response("200 OK", [])
        return [b"metrics"]

    basic = load_access(access_file(tmp_path, BASIC))
    right = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    wrong = "Basic " + base64.b64encode(b"prometheus:guess").decode()
    assert wsgi_call(basic.guard(app), right)[0] == "200 OK"
    for header in (None, wrong, f"Bearer {PASSWORD}", ""):
        status, headers, body = wsgi_call(basic.guard(app), header)
        assert status.startswith("401") and body == b"credentials required\n"
        assert headers["WWW-Authenticate"].startswith("Basic realm=")
    assert PASSWORD not in repr(basic) and basic.describe() == "basic auth"

    bearer = load_access(access_file(tmp_path, BEARER))
    assert wsgi_call(bearer.guard(app), f"Bearer tok-{PASSWORD}")[0] == "200 OK"
    assert wsgi_call(bearer.guard(app), "Bearer tok-other")[0].startswith("401")
    assert bearer.describe() == "a bearer token"


@pytest.mark.parametrize(("body", "secret", "says"), [
    ("[tls\n", PASSWORD, "not TOML"),
    ('[basic]\nusername = "p"\n', PASSWORD, "unknown section(s) basic"),
    (BASIC + BEARER, PASSWORD, "basic_auth or authorization, not both"),
    ('[basic_auth]\nusername = "p"\n', PASSWORD, "basic_auth.password_file is missing"),
    ('[basic_auth]\nusername = "a:b"\npassword_file = "metrics.password"\n', PASSWORD,
     "username must be a name without ':'"),
    ('[basic_auth]\nusername = "p"\npassword_file = "nope"\n', PASSWORD, "no such file"),
    (BASIC, f"{PASSWORD}\nsecond line", "must hold one line"),
    ('[authorization]\ntype = "Digest"\ncredentials_file = "metrics.token"\n', PASSWORD,
     "authorization.type must be Bearer"),
    ('[tls]\ncert_file = "metrics.password"\nkey_file = "metrics.token"\n', PASSWORD,
     "not a usable certificate and key"),
    ("", PASSWORD, "names neither tls nor credentials"),
    ('tls = "metrics.pem"\n', PASSWORD, "tls must be a [section], not a value"),
])
def test_a_wrong_access_file_is_one_line_naming_the_key_and_never_the_secret(
        tmp_path: Path, body: str, secret: str, says: str) -> None:
    with pytest.raises(UserError) as info:
        load_access(access_file(tmp_path, body, secret))
    message = str(info.value)
    assert says in message and "\n" not in message, message
    assert PASSWORD not in message and "metrics-access" in message


def test_a_missing_access_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--metrics-access .*nowhere\.toml: No such file"):
        load_access(tmp_path / "nowhere.toml")


def test_the_exporter_serves_metrics_over_tls_to_the_scraper_with_the_password(
        kafka, groupscope, tmp_path: Path) -> None:
    ca = make_ca(tmp_path / "ca")
    cert = ca.issue("metrics", common_name="localhost", sans=("IP:127.0.0.1", "DNS:localhost"),
                    server=True)
    config = access_file(tmp_path, f'[tls]\ncert_file = "{cert.cert}"\nkey_file = "{cert.key}"\n'
                         + BASIC)
    port = free_port()
    cmd = groupscope("exporter", "--bootstrap", kafka.bootstrap, "--address", "127.0.0.1",
                     "--port", str(port), "--interval", "1", "--metrics-access", str(config),
                     "--no-history")
    wait_serving(cmd, port)
    assert f"metrics at https://localhost:{port}/metrics, asking TLS and basic auth" in \
        cmd.stdout()
    trusted = ssl.create_default_context(cafile=str(ca.cert))
    def get(header: str | None, context: ssl.SSLContext = trusted,
            path: str = "/metrics") -> tuple[int, str]:
        request = urllib.request.Request(f"https://127.0.0.1:{port}{path}",
                                         headers={"Authorization": header} if header else {})
        try:
            with urllib.request.urlopen(request, timeout=10, context=context) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""

    right = "Basic " + base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    # a client that connects and says nothing holds up no one
    with socket.create_connection(("127.0.0.1", port)):
        assert get(None)[0] == 401
        status, body = get(right)
        assert status == 200
    samples = parse(body)  # prometheus_client's own parser reads every line
    assert any(name.startswith("groupscope_") for name, _ in samples), sorted(samples)[:5]
    assert get("Basic " + base64.b64encode(b"prometheus:guess").decode())[0] == 401
    # the probe's /healthz asks no credentials and says nothing but whether it reads
    def healthy() -> tuple[int, str] | None:
        got = get(None, path="/healthz")
        return got if got[0] == 200 else None

    _status, line = wait_until(healthy, 30, interval=0.5, what="/healthz ok")
    assert line.startswith("ok: the last cycle ended") and kafka.bootstrap not in line
    with pytest.raises(OSError):  # plain HTTP gets nothing from a TLS port (reset, refused)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10)
    with pytest.raises(urllib.error.URLError):  # nor a scraper that does not trust it
        get(right, ssl.create_default_context())
    assert PASSWORD not in cmd.stdout() + cmd.stderr()


def test_metrics_access_without_a_metrics_port_is_refused(kafka, groupscope,
                                                          tmp_path: Path) -> None:
    config = access_file(tmp_path, BASIC)
    cmd = groupscope("watch", "--bootstrap", kafka.bootstrap, "--port", str(free_port()),
                     "--metrics-access", str(config), "--no-history")
    assert "give --metrics-port too" in one_line_error(cmd)
