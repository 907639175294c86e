"""`groupscope watch --metrics-port`: /metrics is on from process start, with no browser; the
page over TLS, and the one-line refusals of its access flags.

Streamlit runs a page's script only when a browser session opens, so a watcher the page
started would never run here; the metrics prove the watcher was started by the command.
"""

from __future__ import annotations

import signal
import ssl
import time
import urllib.request

import psutil
import pytest

from backend.netutil import free_port, port_open, wait_until
from backend.proc import STOP_WITHIN_S, abort_if_exited
from tests.exporter.conftest import scrape, value, wait_exported
from tests.exporter.test_exporter_live import produce_exactly, wait_serving
from tests.observer.conftest import create_topic
from tests.observer.seed import seed_groups
from tests.oidc import oidc_provider, sign_in_file
from tests.tlsutil import make_ca


@pytest.mark.timeout(120)
def test_watch_serves_metrics_from_the_start_and_sigterm_leaves_nothing(
        kafka, unique, groupscope, tmp_path, monkeypatch):
    monkeypatch.setenv("GROUPSCOPE_DATA", str(tmp_path / "data"))
    topic, group = f"wm-{unique}", f"wm-group-{unique}"
    create_topic(kafka, topic, 2)
    produce_exactly(kafka, topic, (6, 9))
    seed_groups(kafka, {group: {(topic, 0): 1, (topic, 1): 9}})
    web, metrics = free_port(), free_port()
    rules = tmp_path / "alerts.toml"  # as docs/production.md gives them to watch
    rules.write_text(f'[[rule]]\nname = "nobody-consumes"\nkind = "empty_lag"\n'
                     f'groups = ["{group}"]\nfor = "0s"\n')
    # beyond loopback only with --no-auth (refused without it: below), and then said so
    cmd = groupscope("watch", "--bootstrap", kafka.bootstrap, "--port", str(web),
                     "--metrics-port", str(metrics), "--address", "0.0.0.0", "--no-auth",
                     "--alerts", str(rules))
    wait_serving(cmd, metrics)
    assert "open to everyone who can reach it: no sign-in (--no-auth)" in cmd.stdout()
    assert "alerts: 1 rule(s)" in cmd.stdout()

    s = wait_exported(metrics, 60, cluster=kafka.bootstrap, group=group, topic=topic)
    assert value(s, "groupscope_group_lag_messages", cluster=kafka.bootstrap, group=group,
                 topic=topic) == 5
    # a cycle whose listing timed out (seen at load 29) says 0 until the next lists again
    wait_until(lambda: value(scrape(metrics), "groupscope_exporter_cluster_up",
                             cluster=kafka.bootstrap) == 1, 60, interval=0.5,
               what="a cycle that listed the cluster")
    out = cmd.stdout()
    assert f"http://localhost:{web}" in out and f"http://localhost:{metrics}/metrics" in out
    wait_until(lambda: "nobody-consumes" in cmd.stderr() and group in cmd.stderr(),
               timeout=30, what="the alert's log line")

    # the dashboard is served by the same process, never opened
    def dashboard_up() -> bool:
        with urllib.request.urlopen(f"http://127.0.0.1:{web}/_stcore/health", timeout=5) as r:
            return r.read() == b"ok"

    wait_until(dashboard_up, timeout=60, interval=0.5, what="the dashboard's health check")
    proc = psutil.Process(cmd.proc.pid)
    family = [proc, *proc.children(recursive=True)]

    started = time.monotonic()
    cmd.proc.send_signal(signal.SIGTERM)
    assert cmd.proc.wait(STOP_WITHIN_S + 5) == 0, cmd.stderr()
    assert time.monotonic() - started < STOP_WITHIN_S
    _, alive = psutil.wait_procs(family, timeout=5)
    assert not alive
    assert not port_open("127.0.0.1", web) and not port_open("127.0.0.1", metrics)


def test_watch_beyond_loopback_without_no_auth_is_refused_before_anything_starts(
        groupscope) -> None:
    web = free_port()
    cmd = groupscope("watch", "--bootstrap", f"127.0.0.1:{free_port()}", "--port", str(web),
                     "--address", "0.0.0.0")
    assert cmd.proc.wait(30) == 2, cmd.stderr()
    err = cmd.stderr().strip()
    assert err.startswith("groupscope watch: --address 0.0.0.0") and "--no-auth" in err, err
    assert "\n" not in err and not port_open("127.0.0.1", web)


@pytest.mark.timeout(120)
def test_watch_serves_its_page_over_tls_from_the_given_certificate(
        kafka, groupscope, tmp_path) -> None:
    """As docs/production.md starts it for a team: every address, sign-in, TLS."""
    ca = make_ca(tmp_path / "ca")
    cert = ca.issue("page", common_name="localhost", sans=("IP:127.0.0.1", "DNS:localhost"),
                    server=True)
    web = free_port()
    trusted = ssl.create_default_context(cafile=str(ca.cert))

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{web}/_stcore/health", timeout=5,
                                        context=trusted) as answer:
                return answer.read() == b"ok"
        except OSError:
            return False

    with oidc_provider(tmp_path / "oidc.log") as issuer:
        cmd = groupscope("watch", "--bootstrap", kafka.bootstrap, "--port", str(web),
                         "--address", "0.0.0.0", "--sign-in", str(sign_in_file(tmp_path, issuer)),
                         "--tls-cert", str(cert.cert), "--tls-key", str(cert.key))
        wait_until(healthy, timeout=60, interval=0.5, what="the page's health check over TLS",
                   abort=abort_if_exited(cmd.proc, "watch", cmd.stderr, AssertionError))
        assert f"https://localhost:{web}" in cmd.stdout()
        with pytest.raises(OSError):  # no plain HTTP beside it
            urllib.request.urlopen(f"http://127.0.0.1:{web}/_stcore/health", timeout=5).read()


@pytest.mark.parametrize(("flags", "says"), [
    (("--tls-cert", "{cert}"), "--tls-cert and --tls-key go together"),
    (("--tls-cert", "{cert}", "--tls-key", "{missing}"), "--tls-key {missing} cannot be read"),
    (("--tls-cert", "{cert}", "--tls-key", "{cert}.txt"), "is not a PEM file"),
    (("--sign-in", "{missing}", "--no-auth"), "not allowed with argument"),
    (("--sign-in", "{missing}"), "sign-in file {missing} cannot be read"),
])
def test_watch_refuses_bad_tls_and_sign_in_flags_in_one_line(
        groupscope, tmp_path, flags: tuple[str, ...], says: str) -> None:
    names = {"cert": tmp_path / "page.pem", "missing": tmp_path / "missing.pem"}
    names["cert"].write_text("-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "page.pem.txt").write_text("not a certificate\n")
    web = free_port()
    cmd = groupscope("watch", "--bootstrap", f"127.0.0.1:{free_port()}", "--port", str(web),
                     *(f.format(**names) for f in flags))
    assert cmd.proc.wait(30) == 2, cmd.stderr()
    err = cmd.stderr().strip()
    assert says.format(**names) in err and "\n" not in err.split("error:")[-1], err
    assert not port_open("127.0.0.1", web)
