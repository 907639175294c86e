"""Subcommands for the embedded stack: up, broker, spark, web.

Imports inside functions keep `groupscope --help` and each subcommand's start from loading
what only another one uses: Kafka's nodes, Spark's engine, the launcher, the room and the soak
(psutil), the always-on watcher (prometheus_client, NumPy) and Streamlit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from backend.cli_common import UserError, add_command, positive
from backend.contracts import DEFAULT_GROUP, INPUT_TOPIC
from backend.contracts.room import ENV_OPEN_TO_ALL, ENV_ROOM_ADDRESS, SPARK_TOKEN_FILE, read_secret
from backend.exporter.options import (
    DEFAULT_ADDRESS,
    DEFAULT_INTERVAL_S,
    add_group_filter_args,
    group_filter,
    tcp_port,
)
from backend.history.cli import add_recording_args, recording
from backend.kafka.settings import resolve_settings
from backend.netutil import is_loopback
from backend.paths import data_dir
from backend.proc import StopSignals

# the dashboard's scripts and its Streamlit settings (`.streamlit/config.toml`), found beside
# this package in a checkout and in an installed wheel alike
DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "up", _up, cluster=True,
                    help="start broker, Spark, backend and dashboard; Ctrl-C stops all",
                    description="Start every Procfile process in order, wait for each to "
                                "be ready, print the dashboard URL; Ctrl-C stops all of it.")
    p.add_argument("--spark-remote", help="external Spark Connect URL (env SPARK_REMOTE)")
    p.add_argument("--room", action="store_true",
                   help="a workshop room: open the broker, Spark (with a token) and the "
                        "dashboard on this machine's LAN address; only this machine's own "
                        "browser (or the passcode printed here) gets the controls")
    p.add_argument("--room-address", metavar="IP",
                   help="the room's address of this machine (default: the address of the "
                        "default route's interface); implies --room")
    p.add_argument("--brokers", type=int, metavar="N",
                   help="Kafka nodes of the embedded cluster (default 1; 3 or more: a "
                        "controller quorum of 3 and topics with 3 replicas; env "
                        "GROUPSCOPE_BROKERS)")
    p.add_argument("--spark-workers", type=int, metavar="N",
                   help="run Spark as a standalone master with N workers behind the Connect "
                        "server (default 0: local[*]; env GROUPSCOPE_SPARK_WORKERS)")

    p = add_command(sub, "broker", _broker,
                    help="run the embedded Kafka broker(s) in the foreground",
                    description="Run Apache Kafka (KRaft) until Ctrl-C/SIGTERM: one node, or "
                                "a cluster of N with --brokers. Skipped when an external "
                                "cluster is configured.")
    p.add_argument("--port", type=int, default=None, help="listener port (default 9092, "
                   "env GROUPSCOPE_KAFKA_PORT); with --brokers, node 1's, the others take "
                   "free ports")
    p.add_argument("--brokers", type=int, default=None, metavar="N",
                   help="Kafka nodes (default 1, env GROUPSCOPE_BROKERS); 3 or more form a "
                        "controller quorum of 3")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="storage directory (default .groupscope/broker; node-<id>/ in it per "
                        "node of a cluster)")

    p = add_command(sub, "spark", _spark,
                    help="run the embedded Spark Connect server in the foreground",
                    description="Run a Spark Connect server (local[*], or the driver of a "
                                "standalone master and N workers with --workers) until "
                                "Ctrl-C/SIGTERM. Skipped when SPARK_REMOTE points elsewhere.")
    p.add_argument("--port", type=int, default=None,
                   help="gRPC port (default 15002, env GROUPSCOPE_SPARK_PORT)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run on a standalone master with N workers, one executor each "
                        "(default 0: local[*]; env GROUPSCOPE_SPARK_WORKERS)")

    p = add_command(sub, "web", _web, help="serve the dashboard (streamlit)",
                    description="Serve the Streamlit dashboard on GROUPSCOPE_WEB_PORT.")
    p.add_argument("--port", type=int, default=None, help="HTTP port (default 8501)")

    p = add_command(sub, "watch", _watch, cluster=True,
                    help="watch any consumer group read-only in the browser",
                    description="Serve the dashboard for an existing cluster, opening the "
                                "Watch page with every control hidden. Nothing is joined, "
                                "committed or changed on the cluster.")
    p.add_argument("--group", help="consumer group to open (default: pick on the page)")
    p.add_argument("--allow-offset-writes", action="store_true",
                   help="add the Offsets page, for this machine's browser only (with "
                        "--sign-in: for operators): reset a group's committed offsets, "
                        "preview first, the group's name typed to apply, every write audited "
                        "in the memory (off by default: watch changes nothing)")
    p.add_argument("--port", type=int, default=None,
                   help="HTTP port (default 8501, env GROUPSCOPE_WEB_PORT)")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1: this machine only; "
                        "0.0.0.0 for every interface, which needs --no-auth)")
    access = p.add_mutually_exclusive_group()
    access.add_argument("--sign-in", metavar="FILE", type=Path,
                        help="sign everyone in through your OpenID Connect provider first, "
                             "with the roles viewer and operator from a claim of the token "
                             "(TOML; docs/production.md#sign-in)")
    access.add_argument("--no-auth", action="store_true",
                        help="serve beyond this machine with no sign-in, on purpose: everyone "
                             "who can reach --address sees every group (said at start and on "
                             "the page)")
    p.add_argument("--tls-cert", metavar="FILE", type=Path,
                   help="serve the page over HTTPS with this certificate (PEM; with --tls-key)")
    p.add_argument("--tls-key", metavar="FILE", type=Path,
                   help="the certificate's private key (PEM; with --tls-cert)")
    p.add_argument("--metrics-port", type=tcp_port, metavar="N",
                   help="also serve Prometheus /metrics of every group on port N from the "
                        "start, as `groupscope exporter` does")
    p.add_argument("--metrics-address", default=DEFAULT_ADDRESS, metavar="A",
                   help=f"address of /metrics (default {DEFAULT_ADDRESS})")
    p.add_argument("--metrics-access", metavar="FILE",
                   help="TLS and basic auth or a bearer token for /metrics, from a TOML file "
                        "(docs/production.md#protect-metrics); default: open to whoever "
                        "reaches the address")
    p.add_argument("--alerts", metavar="FILE",
                   help="evaluate these alert rules (TOML) from the start, with or without "
                        "a browser open")
    p.add_argument("--interval", type=positive(float), default=DEFAULT_INTERVAL_S, metavar="S",
                   help=f"seconds between refreshes of every group, for the Groups page, the "
                        f"memory, /metrics and alerts (default {DEFAULT_INTERVAL_S:g})")
    add_group_filter_args(p)
    add_recording_args(p)

    p = add_command(sub, "soak", _soak,
                    help="run the stack, kill replicas on a timer, check for leaks",
                    description="Start `groupscope up` on a temporary data dir and free "
                                "ports, kill a replica every K s through the control API, "
                                "sample RSS, fds, threads and zombies of every process, "
                                "stop the stack and check nothing is left. Exit code 1 "
                                "when a check fails.")
    p.add_argument("--duration", type=positive(float), default=120.0, metavar="S",
                   help="seconds to run once the stack is up (default 120)")
    p.add_argument("--kill-every", type=positive(float), default=20.0, metavar="K",
                   help="seconds between replica kills (default 20)")
    p.add_argument("--interval", type=positive(float), default=2.0, metavar="S",
                   help="seconds between samples (default 2)")
    p.add_argument("--json", type=Path, default=None, metavar="PATH",
                   help="also write the result as JSON")


def _soak(args: argparse.Namespace) -> int:
    from backend.stack.soak import main

    return main(args.duration, args.kill_every, args.interval, args.json)


def _idle_until_signal(reason: str) -> int:
    """Honcho stops every process when one exits, so a skipped process waits instead."""
    print(reason, file=sys.stderr, flush=True)
    with StopSignals() as signals:
        signals.wait()
    return 0


def _broker(args: argparse.Namespace) -> int:
    from backend.broker.nodes import EmbeddedCluster
    from backend.stack.config import ENV_BROKERS, StackConfig

    if os.environ.get("GROUPSCOPE_BOOTSTRAP"):
        return _idle_until_signal("external Kafka configured: no embedded broker started")
    if args.brokers is not None:
        os.environ[ENV_BROKERS] = str(args.brokers)
    cfg = StackConfig.from_env()
    cluster = EmbeddedCluster(args.data_dir or data_dir() / "broker", brokers=cfg.brokers,
                              port=args.port or cfg.kafka_port, room_address=cfg.room_address,
                              room_port=cfg.room_kafka if cfg.room_address else None)
    return cluster.run_foreground()


def _spark(args: argparse.Namespace) -> int:
    from backend.engine.server import SparkConnectServer
    from backend.stack.config import ENV_SPARK_WORKERS, StackConfig

    if args.workers is not None:
        os.environ[ENV_SPARK_WORKERS] = str(args.workers)
    cfg = StackConfig.from_env()
    if cfg.external_spark:
        return _idle_until_signal(f"SPARK_REMOTE={cfg.spark_remote}: no embedded Spark started")
    server = SparkConnectServer(data_dir() / "spark", port=args.port or cfg.spark_port,
                                host=cfg.spark_address, driver_memory=cfg.spark_memory,
                                token=_room_spark_token(cfg), workers=cfg.spark_workers)
    return server.run_foreground()


def _room_spark_token(cfg) -> str | None:
    """In a room, the token every Spark Connect client must bring; refuses to open Spark to
    the room without one."""
    if not cfg.room_address:
        return None
    token = read_secret(data_dir(), SPARK_TOKEN_FILE)
    if not token:
        raise UserError(f"room mode without {data_dir() / SPARK_TOKEN_FILE}: start the room "
                        f"with `groupscope up --room`")
    return token


def _web(args: argparse.Namespace) -> int:
    from backend.stack.config import StackConfig

    cfg = StackConfig.from_env()
    return _exec_dashboard(args.port or cfg.web_port, cfg.web_address)


def _watch(args: argparse.Namespace) -> int:
    """The web process in read-only mode; the properties file is checked before Streamlit
    starts, so a bad line is a one-line error rather than a page error."""
    from backend.stack.config import StackConfig

    open_to_all = not is_loopback(args.address) and not args.sign_in
    if open_to_all and not args.no_auth:
        raise UserError(f"--address {args.address} would show every group of the cluster to "
                        f"whoever reaches it: give --sign-in FILE (your OpenID Connect "
                        f"provider), keep the default 127.0.0.1, or give --no-auth to serve it "
                        f"open on purpose")
    tls = _tls_files(args.tls_cert, args.tls_key)
    config = str(Path(args.kafka_config).expanduser().resolve()) if args.kafka_config else None
    settings = resolve_settings(args.bootstrap, config)
    os.environ.update({"GROUPSCOPE_READONLY": "1", "GROUPSCOPE_BOOTSTRAP": settings.bootstrap,
                       "GROUPSCOPE_OFFSET_WRITES": "1" if args.allow_offset_writes else "",
                       ENV_OPEN_TO_ALL: "1" if open_to_all else ""})
    if config:
        os.environ["GROUPSCOPE_KAFKA_CONFIG"] = config
    if args.group:
        os.environ["GROUPSCOPE_GROUP"] = args.group
    port = args.port or StackConfig.from_env().web_port
    shown = "localhost" if args.address in ("127.0.0.1", "0.0.0.0") else args.address
    scheme = "https" if tls else "http"
    writers = "operators only" if args.sign_in else "this machine's browser only"
    mode = (f"read-only but for the Offsets page ({writers})"
            if args.allow_offset_writes else "read-only")
    where = (f"watching {settings.describe()} {mode} at {scheme}://{shown}:{port}"
             + (" (and on every interface)" if args.address == "0.0.0.0" else "")
             + (", open to everyone who can reach it: no sign-in (--no-auth)"
                if open_to_all else "")
             + (f", signed in through {args.sign_in}" if args.sign_in else ""))
    # always on, browser or not: the watcher (and its memory, /metrics and alerts when asked
    # for) start before Streamlit, which then runs in this process so the pages read the
    # same watcher
    from backend.exporter.serve import always_on

    # the sign-in file and its provider first: a bad one is one line before anything starts
    with _signed_in(args.sign_in) as secrets_file, \
            always_on(settings, metrics_port=args.metrics_port,
                      metrics_address=args.metrics_address, alerts_file=args.alerts,
                      interval=args.interval, history=recording(args), role="watch",
                      metrics_access=args.metrics_access,
                      include=group_filter(args.groups, args.exclude_groups)) as on:
        described = on.describe()
        print(f"{where}; {described}" if described else where, flush=True)
        options = {**_streamlit_options(port, args.address), **tls}
        if secrets_file:
            options["secrets.files"] = [str(secrets_file)]
        _run_dashboard(options)
    return 0


def _tls_files(cert: Path | None, key: Path | None) -> dict[str, str]:
    """Streamlit's HTTPS options for --tls-cert/--tls-key, each file checked readable."""
    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        raise UserError("--tls-cert and --tls-key go together: give the certificate and its "
                        "private key (PEM files)")
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        try:
            head = path.expanduser().read_text(encoding="ascii", errors="replace")[:4096]
        except OSError as exc:
            raise UserError(f"{flag} {path} cannot be read: {exc.strerror or exc}") from None
        if "-----BEGIN" not in head:
            raise UserError(f"{flag} {path} is not a PEM file (no -----BEGIN line)")
    return {"server.sslCertFile": str(cert.expanduser().resolve()),
            "server.sslKeyFile": str(key.expanduser().resolve())}


@contextlib.contextmanager
def _signed_in(path: Path | None) -> Iterator[Path | None]:
    """With --sign-in, Streamlit's secrets file for it while the page is served."""
    from backend.contracts.signin import ENV_SIGN_IN, SignInError

    if path is None:
        os.environ.pop(ENV_SIGN_IN, None)  # the pages sign nobody in
        yield None
        return
    from backend.stack.signin import streamlit_secrets

    resolved = path.expanduser().resolve()
    try:
        with streamlit_secrets(resolved, data_dir()) as (_sign_in, secrets_file):
            os.environ[ENV_SIGN_IN] = str(resolved)
            yield secrets_file
    except SignInError as exc:
        raise UserError(str(exc)) from None


def _streamlit_options(port: int, address: str) -> dict[str, object]:
    return {"server.port": port, "server.address": address, "server.headless": True,
            "browser.gatherUsageStats": False, "server.fileWatcherType": "none"}


def _exec_dashboard(port: int, address: str) -> int:
    cmd = [sys.executable, "-m", "streamlit", "run", str(DASHBOARD / "app.py"),
           *(f"--{k}={str(v).lower() if isinstance(v, bool) else v}"
             for k, v in _streamlit_options(port, address).items())]
    _enter_dashboard_dir()
    os.execv(sys.executable, cmd)
    return 0  # not reached


def _enter_dashboard_dir() -> None:
    """Streamlit reads its settings from `.streamlit/config.toml` in the working directory:
    the dashboard package's own, in a checkout and in an installed wheel alike. The data
    directory is pinned first, since by default it is relative to where the command ran."""
    os.environ["GROUPSCOPE_DATA"] = str(data_dir().resolve())
    os.chdir(DASHBOARD)


def _run_dashboard(options: dict[str, object]) -> None:
    """Streamlit in this process, until SIGINT/SIGTERM: its own handlers stop the server and
    `bootstrap.run` returns, leaving the caller's shutdown to run (bounded; see always_on)."""
    from streamlit.web import bootstrap

    app = str(DASHBOARD / "app.py")
    _enter_dashboard_dir()
    flags = {k.replace(".", "_"): v for k, v in options.items()}
    bootstrap.load_config_options(flag_options=flags)
    bootstrap.run(app, False, [], flags)


def _up(args: argparse.Namespace) -> int:
    from backend.stack.config import ENV_BROKERS, ENV_SPARK_WORKERS, StackConfig
    from backend.stack.launcher import StackLauncher

    if args.bootstrap:
        os.environ["GROUPSCOPE_BOOTSTRAP"] = args.bootstrap
    if args.kafka_config:
        os.environ["GROUPSCOPE_KAFKA_CONFIG"] = str(Path(args.kafka_config).resolve())
    if args.spark_remote:
        os.environ["SPARK_REMOTE"] = args.spark_remote
    if args.brokers is not None:
        os.environ[ENV_BROKERS] = str(args.brokers)
    if args.spark_workers is not None:
        os.environ[ENV_SPARK_WORKERS] = str(args.spark_workers)
    StackConfig.from_env().check()
    code = _up_room(args) if args.room or args.room_address else StackLauncher().run()
    # Every child is stopped and the room's files are gone by now. A readiness probe can
    # still sit inside a gRPC call to something foreign on Spark's port (its waiter thread
    # is abandoned, not joinable), and gRPC's exit hooks would then hold the interpreter
    # open: leave without them.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _up_room(args: argparse.Namespace) -> int:
    """The stack opened to the room: the room's files first (secrets, wheel, room.json),
    then every process with the room address in its environment."""
    from backend.stack import room
    from backend.stack.config import StackConfig
    from backend.stack.launcher import StackLauncher

    if args.bootstrap or args.spark_remote:
        raise UserError("--room opens the embedded broker and Spark to the room; it does "
                             "not combine with --bootstrap or --spark-remote")
    address = room.check_room_address(args.room_address or room.default_room_address())
    os.environ[ENV_ROOM_ADDRESS] = address
    cfg = StackConfig.from_env()
    data = data_dir()
    info, passcode = room.open_room(
        data, address, kafka_port=cfg.room_kafka, spark_port=cfg.spark_port,
        web_port=cfg.web_port, topic=INPUT_TOPIC, group=DEFAULT_GROUP)
    print(f"room on {address}: participants open {info.dashboard_url} and bootstrap from "
          f"{info.bootstrap}\npresenter: http://localhost:{cfg.web_port} on this machine, or "
          f"passcode {passcode} from another device (also in {data / 'room.passcode'}, 0600)",
          flush=True)
    try:
        return StackLauncher(cfg).run()
    finally:
        room.close_room(data)
