"""Least privilege: the read-only dashboard on a SASL + ACL broker, as a least-privileged user.

A real `groupscope web` in watch mode (GROUPSCOPE_READONLY, what `groupscope watch` sets)
connects with a client.properties file for the `watcher` principal, which holds only
DESCRIBE on the cluster and the group and READ + DESCRIBE on the topic. Headless Chromium
loads the page. Proven on the rendered DOM: the group and its lanes show; no enabled control
could change the group, the replicas, the fleet or the topic; the password is in neither the
HTML nor the server's log. With a wrong password the page shows a clear error that does not
echo it. The SASL broker and its ACLs are test_acl_observer.py's.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from backend.netutil import wait_until
from tests.dashboard.browser import open_page, web_server
from tests.observer.conftest import Members, SteadyProducer, create_topic
from tests.observer.test_acl_observer import PASSWORDS, grant_watcher, secure_broker

__all__ = ["secure_broker"]  # the module-scoped SASL broker fixture, reused

# Labels of every control the Live page offers when it may change something (controls.py)
CONTROL_LABELS = re.compile(r"^(Kill|Stop|Start|Scale|Restart|Apply to new replicas|Set rate|"
                            r"Set streams|Add partitions)$", re.I)


def _properties(path: Path, password: str) -> Path:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=watcher\nsasl.password={password}\n")
    return path


def _env(bootstrap: str, config: Path, group: str, topic: str, data: Path) -> dict[str, str]:
    return {"GROUPSCOPE_READONLY": "1", "GROUPSCOPE_BOOTSTRAP": bootstrap,
            "GROUPSCOPE_KAFKA_CONFIG": str(config), "GROUPSCOPE_GROUP": group,
            "GROUPSCOPE_TOPIC": topic, "GROUPSCOPE_DATA": str(data)}


def _enabled_controls(page) -> list[str]:
    """Enabled buttons/inputs that would act on the cluster or the supervisor."""
    found = []
    for b in page.query_selector_all("button"):
        text = (b.inner_text() or "").strip()
        if CONTROL_LABELS.match(text) and b.is_enabled():
            found.append(text)
    # number inputs exist only among the controls (replicas, rate, streams, partitions)
    found += [f"number input {i}" for i, n in
              enumerate(page.query_selector_all("[data-testid='stNumberInput'] input"))
              if n.is_enabled()]
    # nor a form: `groupscope watch` fixes the cluster, so no field may repoint the server or
    # name a file on it (the Live view's stream filters are plain text inputs, not forms)
    found += [f"form {i}" for i, _ in enumerate(page.query_selector_all("[data-testid='stForm']"))]
    return found


@pytest.mark.timeout(300)
def test_watch_mode_as_watcher_shows_the_group_offers_no_control_and_hides_the_password(
        secure_broker, chromium, tmp_path, unique):
    admin = secure_broker.settings
    topic, group = f"lp-{unique}", f"lp-group-{unique}"
    create_topic(admin, topic, 4)
    grant_watcher(AdminClient(admin.client_config()), group, topic)
    good = _properties(tmp_path / "watcher.properties", PASSWORDS["watcher"])
    wrong_pw = "Wr0ng-pa55word-zzq"
    wrong = _properties(tmp_path / "wrong.properties", wrong_pw)

    producer = SteadyProducer(admin, topic, rate=20.0).start()
    members = Members(admin, group, topic, "classic", "range", extra=admin.client_config())
    log = tmp_path / "web.log"
    try:
        members.start("lp-a")
        with web_server(_env(admin.bootstrap, good, group, topic, tmp_path / "d1"), log) as url, \
                chromium() as page:
            open_page(page, f"{url}/watch", wait_until="domcontentloaded")

            def lanes_shown():
                html = page.content()
                return html if "gs-lanes" in html and "lp-a" in html else None

            html = wait_until(lanes_shown, 120, interval=1.0, what="the group's lanes as watcher")
            assert group in html
            assert _enabled_controls(page) == []
            assert PASSWORDS["watcher"] not in html and PASSWORDS["admin"] not in html
        text = log.read_text(errors="replace")
        assert PASSWORDS["watcher"] not in text and PASSWORDS["admin"] not in text

        bad_log = tmp_path / "web-wrong.log"
        with web_server(_env(admin.bootstrap, wrong, group, topic, tmp_path / "d2"),
                        bad_log) as url, chromium() as page:
            open_page(page, f"{url}/watch", wait_until="domcontentloaded")

            def error_shown():
                alerts = [a.inner_text() for a in
                          page.query_selector_all("[data-testid='stAlert']")]
                hit = [a for a in alerts if "Connecting" not in a and "Waiting" not in a]
                return (hit, page.content()) if hit else None

            alerts, html = wait_until(error_shown, 120, interval=1.0,
                                      what="an error on the page")
            assert wrong_pw not in html and all(wrong_pw not in a for a in alerts)
            assert _enabled_controls(page) == []
        text = bad_log.read_text(errors="replace")
        assert wrong_pw not in text and PASSWORDS["watcher"] not in text
        # the page names the refused login, not a generic transport failure
        assert any(re.search(r"refused the login", a) for a in alerts), alerts
    finally:
        members.stop_all()
        producer.stop()
