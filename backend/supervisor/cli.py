"""`groupscope backend` (the supervisor) and `groupscope ctl` (talks to it)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from backend.cli import add_cluster_args
from backend.contracts import DEFAULT_GROUP, DEFAULT_PARTITIONS, INPUT_TOPIC

ENV_REPLICA_COMMAND = "GROUPSCOPE_REPLICA_COMMAND"
ENV_CONTROL_PORT = "GROUPSCOPE_CONTROL_PORT"


def register(sub: argparse._SubParsersAction) -> None:
    from backend.supervisor.models import PROTOCOL_ASSIGNORS

    assignors = sorted({a for v in PROTOCOL_ASSIGNORS.values() for a in v})
    p = sub.add_parser(
        "backend", help="run the supervisor: replicas, fleet simulator, control API",
        description="Ensure the topics, run the fleet simulator, start replicas as child "
                    "processes and serve the control API on 127.0.0.1 (endpoint and token in "
                    "<data dir>/control.json and control.token). SIGTERM stops it all.")
    add_cluster_args(p)
    p.add_argument("--spark-remote", help="Spark Connect URL for the replicas (env SPARK_REMOTE)")
    p.add_argument("--group", default=DEFAULT_GROUP)
    p.add_argument("--topic", default=INPUT_TOPIC)
    p.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                   help="partitions of a topic created now (an existing one keeps its count)")
    p.add_argument("--replicas", type=int, default=3, help="replicas to start (default 3)")
    p.add_argument("--protocol", choices=list(PROTOCOL_ASSIGNORS), default="classic")
    p.add_argument("--assignor", choices=assignors, default=None,
                   help="default: range (classic), uniform (consumer)")
    p.add_argument("--exactly-once", action="store_true", help="replicas use transactions")
    p.add_argument("--no-fleet", dest="fleet", action="store_false",
                   help="do not run the fleet simulator")
    p.add_argument("--streams", type=int, default=12, help="simulated cars (default 12)")
    p.add_argument("--rate", type=float, default=200.0, help="messages/s in total (default 200)")
    p.add_argument("--port", type=int, default=None,
                   help=f"control API port (default: a free one; env {ENV_CONTROL_PORT})")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="where control.json/control.token and replica logs go "
                        "(default .groupscope, env GROUPSCOPE_DATA)")
    p.add_argument("--replica-command", default=None,
                   help="command that runs one replica, given the replica arguments "
                        f"(default: groupscope replica; env {ENV_REPLICA_COMMAND})")
    p.add_argument("--stop-grace", type=float, default=30.0,
                   help="seconds a stopping replica gets before SIGKILL (default 30)")
    p.add_argument("--wait", type=float, default=120.0,
                   help="seconds to wait for Kafka to answer at start-up (default 120)")
    p.set_defaults(func=_backend)

    ctl = sub.add_parser(
        "ctl", help="control the running supervisor: status, start, kill, stop, scale, ...",
        description="Talk to `groupscope backend` through its control API.")
    ctl.add_argument("--data-dir", type=Path, default=None,
                     help="the supervisor's data directory (default .groupscope, env "
                          "GROUPSCOPE_DATA)")
    ctl.add_argument("--url", help="API URL (default: from <data dir>/control.json)")
    ctl.add_argument("--json", dest="json_first", action="store_true",
                     help="print JSON instead of a table")
    ctl.add_argument("--token-file", type=Path,
                     help="token file (default: <data dir>/control.token)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    acts = ctl.add_subparsers(dest="action", metavar="ACTION")

    def act(name: str, help: str) -> argparse.ArgumentParser:
        return acts.add_parser(name, help=help, parents=[common], description=help)

    act("status", "replicas, external members, fleet, options")
    act("start", "start one more replica")
    for verb, text in (("kill", "SIGKILL a replica (a crash)"),
                       ("stop", "SIGTERM a replica (graceful leave)"),
                       ("restart", "stop a replica gracefully and start it again")):
        act(verb, text).add_argument("name", metavar="NAME")
    act("scale", "start or stop replicas until N run").add_argument("n", metavar="N")
    act("rate", "fleet rate in messages/s").add_argument("rate", metavar="R")
    act("streams", "number of simulated streams").add_argument("streams", metavar="N")
    act("partitions", "grow the input topic to P partitions; lists streams that move"
        ).add_argument("partitions", metavar="P")
    o = act("options", "protocol / assignor / delivery for replicas started from now on")
    o.add_argument("--protocol", choices=list(PROTOCOL_ASSIGNORS))
    o.add_argument("--assignor", choices=assignors)
    eos = o.add_mutually_exclusive_group()
    eos.add_argument("--exactly-once", dest="exactly_once", action="store_true", default=None)
    eos.add_argument("--at-least-once", dest="exactly_once", action="store_false")
    act("fleet", "start or stop the fleet simulator").add_argument(
        "fleet_action", choices=["start", "stop"])
    ctl.set_defaults(func=_ctl)


# ---- backend --------------------------------------------------------------------------------

def _fail(command: str, message: str, code: int = 2) -> int:
    print(f"groupscope {command}: {message}", file=sys.stderr)
    return code


def _backend(args: argparse.Namespace) -> int:
    import logging

    from backend.cluster.properties import KafkaConfigError
    from backend.cluster.settings import resolve_settings
    from backend.engine.session import spark_remote
    from backend.netutil import wait_until
    from backend.paths import data_dir
    from backend.supervisor.models import PROTOCOL_ASSIGNORS, ReplicaOptions
    from backend.supervisor.processes import DEFAULT_MAX_REPLICAS, default_replica_command
    from backend.supervisor.service import ServiceConfig, SupervisorService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s [backend] %(message)s",
                        stream=sys.stderr)
    if not 0 <= args.replicas <= DEFAULT_MAX_REPLICAS:
        return _fail("backend", f"--replicas must be between 0 and {DEFAULT_MAX_REPLICAS}")
    if args.partitions < 1 or args.streams < 1 or args.rate < 0 or args.stop_grace <= 0:
        return _fail("backend", "--partitions and --streams must be >= 1, --rate >= 0, "
                                "--stop-grace > 0")
    assignor = args.assignor or PROTOCOL_ASSIGNORS[args.protocol][0]
    if assignor not in PROTOCOL_ASSIGNORS[args.protocol]:
        return _fail("backend", f"assignor {assignor} does not work with the {args.protocol} "
                                f"protocol; choose {', '.join(PROTOCOL_ASSIGNORS[args.protocol])}")
    command_text = args.replica_command or os.environ.get(ENV_REPLICA_COMMAND)
    command = tuple(shlex.split(command_text)) if command_text else default_replica_command()
    if not command:
        return _fail("backend", "--replica-command is empty")
    port = args.port if args.port is not None else int(os.environ.get(ENV_CONTROL_PORT) or 0)
    try:
        settings = resolve_settings(args.bootstrap, args.kafka_config)
    except KafkaConfigError as exc:
        return _fail("backend", str(exc))
    kafka_config = args.kafka_config or os.environ.get("GROUPSCOPE_KAFKA_CONFIG") or None
    try:
        wait_until(lambda: settings.check_reachable(timeout=2.0), args.wait, interval=0.5,
                   what=f"Kafka at {settings.bootstrap}")
    except TimeoutError as exc:
        return _fail("backend", str(exc))
    config = ServiceConfig(
        settings=settings, data_dir=args.data_dir or data_dir(), group=args.group,
        topic=args.topic, partitions=args.partitions, kafka_config=kafka_config,
        spark_remote=spark_remote(args.spark_remote), replicas=args.replicas,
        fleet=args.fleet, streams=args.streams, rate=args.rate, port=port,
        options=ReplicaOptions(args.protocol, assignor, args.exactly_once),
        replica_command=command, stop_grace=args.stop_grace)
    try:
        return SupervisorService(config).run_foreground()
    except OSError as exc:
        return _fail("backend", f"cannot start: {exc}")
    except Exception as exc:  # topic errors and the like: one line, the log has the rest
        from backend.cluster.topics import TopicError

        if isinstance(exc, TopicError):
            return _fail("backend", str(exc))
        raise


# ---- ctl ------------------------------------------------------------------------------------

def _number(text: str, what: str, kind: type) -> Any:
    try:
        return kind(text)
    except ValueError:
        noun = "a whole number" if kind is int else "a number"
        raise ValueError(f"{what} must be {noun}, not {text!r}") from None


def _client(args: argparse.Namespace):
    from backend.paths import data_dir
    from backend.supervisor.auth import read_control_files
    from backend.supervisor.client import ControlClient, ControlError

    if args.url:
        token = None
        if args.token_file:
            try:
                token = args.token_file.read_text().strip()
            except OSError as exc:
                raise ControlError(f"cannot read {args.token_file}: {exc.strerror}") from None
        return ControlClient(url=args.url, token=token)
    from backend.supervisor.auth import ControlNotFound

    try:
        ep = read_control_files(args.data_dir or data_dir())
    except ControlNotFound as exc:
        raise ControlError(str(exc)) from None
    if ep.pid and not _pid_running(ep.pid):
        raise ControlError(f"the supervisor that wrote {args.data_dir or data_dir()}/"
                           f"control.json (pid {ep.pid}) is no longer running; start "
                           f"`groupscope backend`")
    token = ep.token
    if args.token_file:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise ControlError(f"cannot read {args.token_file}: {exc.strerror}") from None
    return ControlClient(url=ep.url, token=token)


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: let the HTTP call decide
    return True


def _ctl(args: argparse.Namespace) -> int:
    from backend.supervisor.client import ControlError

    if not getattr(args, "action", None):
        return _fail("ctl", "say what to do: status | start | kill NAME | stop NAME | "
                            "restart NAME | scale N | rate R | streams N | partitions P | "
                            "options ... | fleet start|stop")
    try:
        client = _client(args)
        out = _run_action(client, args)
    except ValueError as exc:
        return _fail("ctl", str(exc))
    except ControlError as exc:
        if exc.status:
            return _fail("ctl", f"refused ({exc.status}): {exc}", 1)
        return _fail("ctl", str(exc))
    if args.json or args.json_first:
        print(json.dumps(out, indent=2))
    else:
        print(_render(args.action, out))
    return 0


def _run_action(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    a = args.action
    if a == "status":
        return client.status().to_dict()
    if a == "start":
        return {"replica": client.start().to_dict()}
    if a in ("kill", "stop", "restart"):
        return {"replica": getattr(client, a)(args.name).to_dict()}
    if a == "scale":
        return client.scale(_number(args.n, "N", int))
    if a == "rate":
        return {"fleet": client.set_rate(_number(args.rate, "R", float))}
    if a == "streams":
        return {"fleet": client.set_streams(_number(args.streams, "N", int))}
    if a == "partitions":
        return client.add_partitions(_number(args.partitions, "P", int)).to_dict()
    if a == "options":
        return {"options": client.set_options(args.protocol, args.assignor,
                                              args.exactly_once).to_dict()}
    if a == "fleet":
        fn = client.fleet_start if args.fleet_action == "start" else client.fleet_stop
        return {"fleet": fn()}
    raise ValueError(f"unknown action {a}")


# ---- rendering ------------------------------------------------------------------------------

def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in rows]
    return "\n".join(lines)


def _uptime(start: float | None, end: float | None) -> str:
    if start is None:
        return "-"
    secs = int((end or time.time()) - start)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _parts(p: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(x) for x in p) if p else "-"


def _paint_names(text: str, colours: list[str]) -> str:
    """Each row's first word in its replica's colour (24-bit ANSI), the header untouched."""
    lines = text.split("\n")
    for i, hex_colour in enumerate(colours, start=1):
        r, g, b = (int(hex_colour[j:j + 2], 16) for j in (1, 3, 5))
        name, sep, rest = lines[i].partition(" ")
        lines[i] = f"\x1b[1;38;2;{r};{g};{b}m{name}\x1b[0m{sep}{rest}"
    return "\n".join(lines)


def _want_colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR") and \
        os.environ.get("TERM") != "dumb"


def render_status(d: dict[str, Any], colour: bool = False) -> str:
    from backend.supervisor.models import Status

    st = Status.from_dict(d)
    rows = []
    for r in st.replicas:
        member = "?" if r.member is None else ("yes" if r.member else "no")
        if r.member and not r.alive:
            member = "stale"  # dead, but the broker keeps it until its session times out
        exit_ = "-"
        if r.returncode is not None:
            exit_ = r.exit_signal or f"code {r.returncode}"
            if r.forced:
                exit_ += " (forced)"
        rows.append([r.name, r.state, str(r.pid or "-"), _uptime(r.started_at, r.ended_at),
                     member, _parts(r.partitions), f"{r.protocol}/{r.assignor}",
                     "exactly-once" if r.exactly_once else "at-least-once",
                     str(r.restarts), exit_])
    for m in st.external:
        rows.append([m.client_id, "external", "-", "-", "yes", _parts(m.partitions),
                     "-", "-", "-", f"host {m.host}"])
    out = [f"group {st.group} ({st.group_state or '?'}) on topic {st.topic}, "
           f"{st.partitions or '?'} partitions; {len(st.running)} replicas running"
           + (f", {len(st.external)} external" if st.external else "")]
    text = table(["NAME", "STATE", "PID", "UPTIME", "MEMBER", "PARTITIONS", "PROTOCOL",
                  "DELIVERY", "RESTARTS", "EXIT"], rows) if rows else "(no replicas)"
    if colour and rows:
        text = _paint_names(text, [r.colour for r in st.replicas] + [m.colour for m in st.external])
    out.append(text)
    o = st.options
    out.append(f"new replicas: {o.protocol}/{o.assignor}, "
               f"{'exactly-once' if o.exactly_once else 'at-least-once'}")
    if st.fleet:
        out.append(_render_fleet(st.fleet))
    if st.broker_error:
        out.append(f"broker: {st.broker_error}")
    return "\n".join(out)


def _render_fleet(f: dict[str, Any]) -> str:
    target = f.get("target_rate")
    target_text = "unlimited" if target is None else f"{target:g}"
    return (f"fleet: {'running' if f.get('running') else 'stopped'}, {f.get('streams')} streams, "
            f"target {target_text} msg/s, measured {f.get('rate')} msg/s, "
            f"{f.get('delivered')} delivered, {f.get('failed')} failed")


def _render(action: str, out: dict[str, Any]) -> str:
    if action == "status":
        return render_status(out, colour=_want_colour())
    if "replica" in out:
        r = out["replica"]
        return f"{r['name']}: {r['state']} (pid {r['pid']})"
    if action == "scale":
        parts = []
        if out.get("started"):
            parts.append("started " + ", ".join(out["started"]))
        if out.get("stopping"):
            parts.append("stopping " + ", ".join(out["stopping"]))
        return "; ".join(parts) or "already at that size"
    if "fleet" in out:
        return _render_fleet(out["fleet"])
    if "options" in out:
        o = out["options"]
        return (f"new replicas: {o['protocol']}/{o['assignor']}, "
                f"{'exactly-once' if o['exactly_once'] else 'at-least-once'}")
    if action == "partitions":
        head = (f"{out['topic']}: {out['before']} -> {out['after']} partitions; "
                f"{len(out['moved'])} of {out['streams_checked']} streams now land on a "
                f"different partition")
        if not out["moved"]:
            return head
        rows = [[s, str(a), str(b)] for s, a, b in out["moved"]]
        return head + "\n" + table(["STREAM", "WAS", "NOW"], rows)
    return json.dumps(out)
