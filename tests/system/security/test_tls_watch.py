"""groupscope watches a TLS cluster read-only through a standard client.properties.

One module-scoped broker (certificates from tests/tlsutil.py) with an SSL listener that requires
client certificates and a SASL_SSL listener (PLAIN), ACLs enforced. The `watcher` principal
holds only DESCRIBE on the cluster and the group and READ + DESCRIBE on the topic, whichever
way it logs in (a certificate's CN is its principal). One group has a member that committed a
known offset, so every partition's lag is a known number. For SSL (CA, client certificate,
key encrypted with `ssl.key.password`) and SASL_SSL (CA, `sasl.password`), a client.properties
that names its files relative to its own directory feeds `groupscope snapshot` and `groupscope
groups` as subprocesses run from elsewhere, and the in-process Observer; all see the group, its
member and its lag. Every password and passphrase is looked for, and must be absent, in their
output, the logs, the Snapshot JSON, the command lines of every child process and every error
for a wrong secret or an untrusted CA.

A test for another reader of the cluster (the overview, the exporter) takes `tls_cluster` and
`lagging_group`, makes its file with `cfg = watch_config(tls_cluster, "SASL_SSL", tmp_path)`,
runs with `--bootstrap cfg.bootstrap --kafka-config cfg.path` (`run_groupscope`) or
`cfg.settings()`, checks the numbers against `lagging_group`, and ends with
`assert_no_secret(cfg.secrets, ...)` over whatever it produced.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from backend.contracts import SNAPSHOT_JSON, Snapshot
from backend.contracts.overview import GROUP_ROWS_JSON
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import KafkaSettings, quiet_logger, resolve_settings
from backend.netutil import free_port, wait_until
from backend.observer.observer import Observer
from backend.observer.overview import OverviewWatcher
from backend.proc import spawn
from dashboard.checks import ClusterTarget
from dashboard.pollers import SharedObserver, SharedOverview
from tests.kafka_security import SecureBroker
from tests.observer.conftest import create_topic
from tests.observer.test_acl_observer import grant_watcher
from tests.tlsutil import CertAuthority, Certificate, broker_tls, make_ca, new_secret

PROTOCOLS = ("SSL", "SASL_SSL")
PARTITIONS = 3
PRODUCED = 30  # records per partition
COMMITTED = 20  # the member's committed offset on every partition: lag 10 each
GROUPSCOPE = Path(sys.executable).with_name("groupscope")
CLI_TIMEOUT_S = 60.0
ENV_CLUSTER = ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG")


# ---- what tests share: the cluster, the group, a client.properties, the checks ----------------

class CommandLines:
    """The command lines of this process's descendants, sampled on a thread while a block runs,
    so a secret passed on any child's command line, however briefly, is seen."""

    def __init__(self, every: float = 0.02) -> None:
        self.seen: set[str] = set()
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        for proc in psutil.Process().children(recursive=True):
            try:
                self.seen.add(" ".join(proc.cmdline()))
            except psutil.Error:
                continue

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.sample()

    def __enter__(self) -> CommandLines:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sample()


@dataclass(frozen=True)
class TlsCluster:
    broker: SecureBroker
    ca: CertAuthority
    watcher_cert: Certificate  # CN=watcher, key encrypted
    admin: KafkaSettings  # the test's own setup client: SSL as CN=admin (a super user)
    sasl_passwords: dict[str, str] = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)  # every password and passphrase made here
    start_cmdlines: frozenset[str] = field(repr=False)  # seen while the broker started


@dataclass(frozen=True)
class WatchConfig:
    """A client.properties for the watcher, and the secrets that must appear nowhere."""

    protocol: str
    bootstrap: str
    path: Path
    secrets: tuple[str, ...] = field(repr=False)

    def settings(self) -> KafkaSettings:
        return resolve_settings(self.bootstrap, str(self.path))


@dataclass(frozen=True)
class WatchedGroup:
    group: str
    topic: str
    client_id: str


@dataclass(frozen=True)
class CliRun:
    code: int
    out: str
    err: str
    seconds: float
    cmdlines: frozenset[str]


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsCluster]:
    certs = tmp_path_factory.mktemp("tls-certs")
    tls, ca = broker_tls(certs)
    watcher = ca.issue("watcher", common_name="watcher", passphrase=new_secret("watcher-key"))
    admin_cert = ca.issue("admin", common_name="admin")  # unencrypted: no secret on any argv
    passwords = {"admin": new_secret("admin-pw"), "watcher": new_secret("watcher-pw")}
    node = SecureBroker(tmp_path_factory.mktemp("tls-broker"), port=free_port(), tls=tls,
                          sasl_users=dict(passwords))
    try:
        with CommandLines() as seen:
            node.start()
        admin = KafkaSettings(node.ssl_bootstrap, {
            "security.protocol": "SSL", "ssl.ca.location": str(ca.cert),
            "ssl.certificate.location": str(admin_cert.cert),
            "ssl.key.location": str(admin_cert.key)}, external=True)
        assert watcher.passphrase
        secrets = (*tls.secrets(), *passwords.values(), ca.passphrase, watcher.passphrase)
        yield TlsCluster(node, ca, watcher, admin, passwords, secrets, frozenset(seen.seen))
    finally:
        node.stop()


class LaggingMember:
    """A real member (consumer protocol) that stays in the group and commits offset COMMITTED
    on every partition once, then never again: the group's lag is exactly PRODUCED - COMMITTED
    per partition for as long as nothing is produced. One thread owns the consumer.
    (tests/observer/member.py auto-commits whatever it reads, which leaves no lag to show.)"""

    def __init__(self, settings: KafkaSettings, group: str, topic: str, client_id: str) -> None:
        self.settings, self.group, self.topic, self.client_id = settings, group, topic, client_id
        self.committed = threading.Event()
        self.error: BaseException | None = None
        self._assigned: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            consumer = Consumer(self.settings.client_config(**{
                "group.id": self.group, "client.id": self.client_id, "group.protocol": "consumer",
                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                "logger": quiet_logger()}))
        except BaseException as exc:
            self.error = exc
            return
        try:
            consumer.subscribe([self.topic], on_assign=lambda _c, tps: self._assigned.update(
                tp.partition for tp in tps))
            while not self._stop.is_set():
                consumer.poll(0.2)
                if not self.committed.is_set() and len(self._assigned) == PARTITIONS:
                    consumer.commit(offsets=[TopicPartition(self.topic, p, COMMITTED)
                                             for p in range(PARTITIONS)], asynchronous=False)
                    self.committed.set()
        except BaseException as exc:
            self.error = exc
        finally:
            consumer.close()

    def start(self) -> LaggingMember:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


@pytest.fixture(scope="module")
def lagging_group(tls_cluster: TlsCluster) -> Iterator[WatchedGroup]:
    suffix = uuid.uuid4().hex[:8]
    watched = WatchedGroup(f"tls-group-{suffix}", f"tls-{suffix}", "tls-member")
    admin = tls_cluster.admin
    create_topic(admin, watched.topic, PARTITIONS)
    grant_watcher(AdminClient(admin.client_config()), watched.group, watched.topic)
    producer = Producer(admin.client_config(logger=quiet_logger()))
    for p in range(PARTITIONS):
        for _ in range(PRODUCED):
            producer.produce(watched.topic, key=f"car-{p:02d}", value=b"{}", partition=p)
    assert producer.flush(30) == 0
    member = LaggingMember(admin, watched.group, watched.topic, watched.client_id).start()
    try:
        def failed() -> None:
            if member.error is not None:
                raise AssertionError(f"the member failed: {member.error}")

        wait_until(member.committed.is_set, 60, what="the member's commit", abort=failed)
        yield watched
    finally:
        member.stop()


def watch_config(cluster: TlsCluster, protocol: str, directory: Path, *,
                 password: str | None = None, key_password: str | None = None,
                 ca: CertAuthority | None = None) -> WatchConfig:
    """A client.properties for `watcher` over `protocol` (SSL or SASL_SSL) in `directory`,
    with its CA (and for SSL its certificate and key) copied beside it and named by relative
    paths, as a user keeps them. `password`, `key_password` and `ca` replace the right ones
    (to test a wrong secret or an unrelated CA); wrong secrets join `secrets` too."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy((ca or cluster.ca).cert, directory / "ca.pem")
    broker = cluster.broker
    lines = {"security.protocol": protocol, "ssl.ca.location": "ca.pem"}
    extra: list[str] = []
    if protocol == "SSL":
        bootstrap = broker.ssl_bootstrap
        shutil.copy(cluster.watcher_cert.cert, directory / "watcher.pem")
        shutil.copy(cluster.watcher_cert.key, directory / "watcher.key")
        key_password = key_password or cluster.watcher_cert.passphrase
        assert key_password
        lines |= {"ssl.certificate.location": "watcher.pem", "ssl.key.location": "watcher.key",
                  "ssl.key.password": key_password}
        extra.append(key_password)
    else:
        bootstrap = broker.sasl_ssl_bootstrap
        password = password or cluster.sasl_passwords["watcher"]
        lines |= {"sasl.mechanism": "PLAIN", "sasl.username": "watcher",
                  "sasl.password": password}
        extra.append(password)
    path = directory / "client.properties"
    path.touch(mode=0o600)
    path.write_text(f"# watcher over {protocol}\nbootstrap.servers={bootstrap}\n"
                    + "".join(f"{k}={v}\n" for k, v in lines.items()))
    secrets = tuple(dict.fromkeys((*cluster.secrets, *extra)))
    return WatchConfig(protocol, bootstrap, path, secrets)


def run_groupscope(*args: str, cwd: Path, timeout: float = CLI_TIMEOUT_S) -> CliRun:
    """`groupscope ARGS` as a child process from `cwd`, with no cluster in its environment;
    the command lines of every descendant are sampled while it runs."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_CLUSTER}
    out_file, err_file = cwd / "cli.out", cwd / "cli.err"
    started = time.monotonic()
    with CommandLines() as seen, open(out_file, "wb") as out, open(err_file, "wb") as err:
        proc = spawn([str(GROUPSCOPE), *args], cwd=cwd, env=env, stdout=out, stderr=err,
                     stdin=subprocess.DEVNULL)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise AssertionError(f"groupscope {args[0]} did not end within {timeout:.0f}s"
                                 ) from None
    return CliRun(code, out_file.read_text(), err_file.read_text(),
                  time.monotonic() - started, frozenset(seen.seen))


def assert_no_secret(secrets: tuple[str, ...], *texts: object) -> None:
    """No secret anywhere in `texts` (strings, or collections of them)."""
    flat: list[str] = []
    for text in texts:
        if isinstance(text, str):
            flat.append(text)
        else:
            flat.extend(map(str, text))  # type: ignore[call-overload]
    for secret in secrets:
        hits = [t[:200] for t in flat if secret in t]
        assert not hits, f"a secret ({secret.split('-')[0]}…) leaked into: {hits}"


def assert_sees_the_group(snap: Snapshot, watched: WatchedGroup) -> None:
    assert snap.error is None, snap.error
    assert (snap.group, snap.topic, snap.state) == (watched.group, watched.topic, "Stable")
    assert [m.client_id for m in snap.members] == [watched.client_id]
    assert sorted(snap.members[0].partitions) == list(range(PARTITIONS))
    assert [(p.partition, p.committed, p.end, p.lag_messages) for p in snap.partitions] == \
        [(p, COMMITTED, PRODUCED, PRODUCED - COMMITTED) for p in range(PARTITIONS)]
    assert snap.total_lag == PARTITIONS * (PRODUCED - COMMITTED)
    assert snap.members[0].lag_messages == snap.total_lag


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ---- the broker ----------------------------------------------------------------------------

def test_broker_keeps_its_tls_passwords_in_its_0600_server_properties_only(tls_cluster):
    broker = tls_cluster.broker
    assert broker.tls is not None
    config = broker.data_dir / "server.properties"
    assert config.stat().st_mode & 0o777 == 0o600
    text = config.read_text()
    assert all(s in text for s in broker.tls.secrets())
    assert f"SSL://127.0.0.1:{broker.ssl_port}" in text
    assert f"SASL_SSL://127.0.0.1:{broker.sasl_ssl_port}" in text
    # not on the command line of the JVM or the storage formatter (sampled during start-up)
    assert any("kafka.Kafka" in c for c in tls_cluster.start_cmdlines)
    assert any("StorageTool" in c for c in tls_cluster.start_cmdlines)
    assert_no_secret(tuple(broker.tls.secrets()), tls_cluster.start_cmdlines,
                     [" ".join(psutil.Process(broker.process.pid).cmdline())])
    # nor in its logs (Kafka prints its settings at start, passwords as [hidden])
    logs = [(broker.data_dir / f).read_text(errors="replace") for f in ("broker.log",
                                                                        "broker.out")]
    assert "ssl.keystore.password = [hidden]" in logs[0]
    assert_no_secret(tls_cluster.secrets, logs)


def test_sasl_passwords_stay_off_the_command_lines_too(tls_cluster):
    broker = tls_cluster.broker
    assert any("StorageTool" in c for c in tls_cluster.start_cmdlines)
    assert_no_secret(tuple(tls_cluster.sasl_passwords.values()), tls_cluster.start_cmdlines,
                     [" ".join(psutil.Process(broker.process.pid).cmdline())])
    # yet every user logs in with SCRAM (its credential made through the admin API)
    for user in tls_cluster.sasl_passwords:
        assert broker.settings_for(user, "SCRAM-SHA-256").check_reachable(timeout=5) == 1


# ---- watching through client.properties ----------------------------------------------------

@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_snapshot_and_groups_commands_watch_over_tls(tls_cluster, lagging_group, tmp_path,
                                                    protocol):
    cfg = watch_config(tls_cluster, protocol, tmp_path / "conf")
    elsewhere = tmp_path / "cwd"  # relative paths in the file must not depend on the cwd
    elsewhere.mkdir()
    snap_run = run_groupscope("snapshot", "--bootstrap", cfg.bootstrap, "--kafka-config",
                              str(cfg.path), "--group", lagging_group.group, "--samples", "1",
                              "--json", cwd=elsewhere)
    assert snap_run.code == 0, snap_run.err
    snap = SNAPSHOT_JSON.validate_json(snap_run.out)
    assert_sees_the_group(snap, lagging_group)

    # bootstrap.servers from the file alone
    groups_run = run_groupscope("groups", "--kafka-config", str(cfg.path), "--json",
                                cwd=elsewhere)
    assert groups_run.code == 0, groups_run.err
    rows = {r.group: r for r in GROUP_ROWS_JSON.validate_json(groups_run.out)}
    row = rows[lagging_group.group]
    assert row.error is None, row.error
    assert (row.members, row.state, row.protocol, row.topics, row.lag_messages) == \
        (1, "Stable", "consumer", (lagging_group.topic,), PARTITIONS * (PRODUCED - COMMITTED))

    assert any(str(GROUPSCOPE) in c for c in snap_run.cmdlines | groups_run.cmdlines)
    assert_no_secret(cfg.secrets, snap_run.out, snap_run.err, groups_run.out, groups_run.err,
                     snap_run.cmdlines, groups_run.cmdlines)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_observer_in_process_sees_the_same_over_tls(tls_cluster, lagging_group, tmp_path,
                                                   caplog, capfd, protocol, monkeypatch):
    caplog.set_level(logging.DEBUG)
    cfg = watch_config(tls_cluster, protocol, tmp_path / "conf")
    monkeypatch.chdir(tmp_path)  # not the file's directory
    settings = cfg.settings()
    assert settings.client_properties["ssl.ca.location"] == str(tmp_path / "conf" / "ca.pem")
    assert protocol in settings.describe()
    observer = Observer(settings, lagging_group.group, topic=lagging_group.topic,
                        sample_every=0.0)
    try:
        def complete() -> Snapshot | None:
            snap = observer.poll_once()
            return snap if snap.error is None and snap.state == "Stable" else None

        snap = wait_until(complete, 30, interval=0.5, what=f"a snapshot over {protocol}")
        errors = list(observer.collector.errors)
    finally:
        observer.stop()
    assert_sees_the_group(snap, lagging_group)
    out, err = capfd.readouterr()
    children = CommandLines()
    children.sample()  # skips a child that exited (or is a zombie) while being read
    assert_no_secret(cfg.secrets, repr(settings), settings.describe(),
                     SNAPSHOT_JSON.dump_json(snap).decode(), errors, caplog.text, out, err,
                     sorted(children.seen))


# ---- wrong settings: one line, at once, no secret -------------------------------------------

@pytest.mark.timeout(60)
def test_wrong_sasl_password_is_one_line_naming_the_login(tls_cluster, lagging_group,
                                                          tmp_path):
    wrong = new_secret("wrong-pw")
    cfg = watch_config(tls_cluster, "SASL_SSL", tmp_path, password=wrong)
    run = run_groupscope("snapshot", "--kafka-config", str(cfg.path), "--group",
                         lagging_group.group, "--samples", "1", cwd=tmp_path)
    assert run.code == 2
    line = one_line(run.err)
    assert line.startswith("groupscope snapshot: ") and "refused the login" in line
    assert "Invalid username or password" in line
    assert run.seconds < 15
    assert_no_secret(cfg.secrets, run.out, run.err, run.cmdlines)


@pytest.mark.timeout(60)
def test_wrong_key_passphrase_is_one_line_naming_ssl_key_password(tls_cluster, lagging_group,
                                                                  tmp_path):
    wrong = new_secret("wrong-key")
    cfg = watch_config(tls_cluster, "SSL", tmp_path, key_password=wrong)
    run = run_groupscope("groups", "--kafka-config", str(cfg.path), cwd=tmp_path)
    assert run.code == 2
    line = one_line(run.err)
    assert "ssl.key.password" in line and "ssl.key.location" in line
    assert_no_secret(cfg.secrets, run.out, run.err, run.cmdlines)


@pytest.mark.timeout(60)
def test_wrong_key_passphrase_is_the_same_one_line_for_the_observer_and_overview(
        tls_cluster, lagging_group, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    cfg = watch_config(tls_cluster, "SSL", tmp_path / "conf",
                       key_password=new_secret("wrong-key"))
    settings = cfg.settings()
    with pytest.raises(KafkaConfigError) as cli:  # what the CLI tools say (checked first)
        settings.check_reachable(timeout=5)
    expected = str(cli.value)
    assert "ssl.key.password" in expected and cfg.bootstrap in expected

    made: list[object] = []
    for make in (lambda: Observer(settings, lagging_group.group, topic=lagging_group.topic),
                 lambda: OverviewWatcher(settings)):
        with pytest.raises(KafkaConfigError) as info:
            made.append(make())
        assert str(info.value) == expected
    assert made == []

    # the dashboard's shared observer and overview show that line instead of raising
    target = ClusterTarget(cfg.bootstrap, str(cfg.path))
    shared, overview = SharedObserver(target, lagging_group.group, lagging_group.topic), \
        SharedOverview(target)
    try:
        assert shared.latest() is None and shared.history() == ()
        assert overview.latest() is None and overview.watcher() is None
    finally:
        shared.stop()
        overview.stop()
    assert (shared.error, overview.error) == (expected, expected)
    out, err = capfd.readouterr()
    assert_no_secret(cfg.secrets, expected, caplog.text, out, err)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_unrelated_ca_fails_fast_saying_the_certificate_could_not_be_verified(
        tls_cluster, lagging_group, tmp_path, protocol):
    other = make_ca(tmp_path / "other-ca", name="other", common_name="unrelated CA")
    cfg = watch_config(tls_cluster, protocol, tmp_path / "conf", ca=other)
    run = run_groupscope("snapshot", "--kafka-config", str(cfg.path), "--group",
                         lagging_group.group, "--samples", "1", cwd=tmp_path)
    assert run.code == 2
    line = one_line(run.err)
    assert "presented a TLS certificate that could not be verified" in line
    assert "ssl.ca.location" in line
    # at the first failed handshake, not after the 10 s the reachability probe allows
    assert run.seconds < 10, f"took {run.seconds:.1f}s"
    assert_no_secret((*cfg.secrets, other.passphrase), run.out, run.err, run.cmdlines)


@pytest.mark.timeout(60)
def test_ssl_without_a_client_certificate_is_named_at_once(tls_cluster, lagging_group,
                                                          tmp_path):
    cfg = watch_config(tls_cluster, "SSL", tmp_path)
    kept = [line for line in cfg.path.read_text().splitlines()
            if not line.startswith(("ssl.certificate.", "ssl.key."))]
    cfg.path.write_text("\n".join(kept) + "\n")
    run = run_groupscope("groups", "--kafka-config", str(cfg.path), cwd=tmp_path)
    assert run.code == 2
    line = one_line(run.err)
    assert "refused this client's TLS certificate" in line
    assert "ssl.certificate.location" in line
    assert run.seconds < 10, f"took {run.seconds:.1f}s"


# ---- client.properties itself (no broker) ---------------------------------------------------

def test_relative_paths_in_client_properties_resolve_against_its_directory(tmp_path,
                                                                           monkeypatch):
    conf = tmp_path / "conf"
    (conf / "certs").mkdir(parents=True)
    for name in ("ca.pem", "certs/me.pem", "certs/me.key"):
        (conf / name).write_text("x")
    absolute = tmp_path / "abs.pem"
    absolute.write_text("x")
    path = conf / "client.properties"
    path.write_text("security.protocol=SSL\nssl.ca.location=ca.pem\n"
                    "ssl.certificate.location=certs/me.pem\n"
                    "ssl.key.location=./certs/me.key\n"
                    f"ssl.crl.location={absolute}\nssl.key.password=k3y-pa55\n"
                    "ssl.endpoint.identification.algorithm=https\n")
    monkeypatch.chdir(tmp_path)
    props = resolve_settings("127.0.0.1:9093", "conf/client.properties").client_properties
    assert props["ssl.ca.location"] == str(conf / "ca.pem")
    assert props["ssl.certificate.location"] == str(conf / "certs" / "me.pem")
    assert Path(props["ssl.key.location"]) == conf / "certs" / "me.key"
    assert props["ssl.crl.location"] == str(absolute)
    assert props["ssl.endpoint.identification.algorithm"] == "https"  # not a path
    assert props["ssl.key.password"] == "k3y-pa55"

    path.write_text("ssl.ca.location=probe\n")  # librdkafka's keyword, not a file
    assert resolve_settings("h:1", str(path)).client_properties["ssl.ca.location"] == "probe"


def test_a_missing_file_in_client_properties_is_named_with_its_key(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SSL\nssl.ca.location=missing/ca.pem\n"
                    "ssl.key.password=n0t-sh0wn\n")
    with pytest.raises(KafkaConfigError) as info:
        resolve_settings("h:1", str(path))
    message = str(info.value)
    assert "ssl.ca.location=missing/ca.pem" in message
    assert str(tmp_path / "missing" / "ca.pem") in message
    assert "\n" not in message and "n0t-sh0wn" not in message


def test_describe_repr_and_scrub_never_show_tls_or_sasl_secrets():
    secrets = {"ssl.key.password": "k3y-pa55-1", "sasl.password": "sa5l-pa55-2",
               "ssl.keystore.password": "st0re-pa55-3", "ssl.keystore.key": "PEM-K3Y-4",
               "ssl.truststore.password": "tru5t-pa55-5"}
    settings = KafkaSettings("broker:9093", {"security.protocol": "SASL_SSL",
                                             "sasl.mechanism": "PLAIN", "sasl.username": "w",
                                             **secrets}, external=True)
    shown = repr(settings) + str(settings) + settings.describe()
    assert "SASL_SSL" in shown and "PLAIN" in shown
    assert_no_secret(tuple(secrets.values()), shown)
    scrubbed = settings.scrub("login as w with sa5l-pa55-2 and\nkey k3y-pa55-1")
    assert scrubbed == "login as w with *** and key ***"
