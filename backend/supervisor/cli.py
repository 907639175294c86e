"""`groupscope backend` (the supervisor) and `groupscope ctl` (talks to it).

Imports inside functions keep `groupscope --help` and each subcommand's start from loading
what only another one uses: the supervisor and its control API (FastAPI, uvicorn) for
`backend`, the control client (psutil) for `ctl`.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from backend.cli_common import add_command, positive
from backend.contracts import (
    AFTER_SUMMARY,
    COMMIT_GUARANTEES,
    COMMIT_MODES,
    DEFAULT_GROUP,
    DEFAULT_PARTITIONS,
    DEFAULT_SHARE_GROUP,
    INPUT_TOPIC,
    TRANSACTIONAL,
    commit_help,
)
from backend.contracts.control import (
    ALL_ASSIGNORS,
    BROKER_ACTIONS,
    DEFAULT_PROTOCOL,
    MAX_RATE,
    MAX_REPLICAS,
    PROTOCOL_ASSIGNORS,
    BrokerNode,
    BrokersAnswer,
    CapacityAnswer,
    FleetState,
    PartitionChange,
    ReplayAnswer,
    ReplayPreview,
    ReplicaInfo,
    ReplicaOptions,
    ScaleAnswer,
    ShareStatus,
    Status,
)
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import resolve_settings
from backend.netutil import wait_until
from backend.paths import data_dir
from backend.spark.session import spark_remote

if TYPE_CHECKING:
    from backend.supervisor.client import ControlClient

ENV_REPLICA_COMMAND = "GROUPSCOPE_REPLICA_COMMAND"
ENV_CONTROL_PORT = "GROUPSCOPE_CONTROL_PORT"


BACKEND_HELP = "run the supervisor: replicas, fleet simulator, control API"
BACKEND = ("Ensure the topics, run the fleet simulator, start replicas as child "
           "processes and serve the control API on 127.0.0.1 (endpoint and token in "
           "<data dir>/control.json and control.token). SIGTERM stops it all.")


def register(sub: argparse._SubParsersAction) -> None:
    assignors = list(ALL_ASSIGNORS)
    p = add_command(sub, "backend", _backend, cluster=True, help=BACKEND_HELP,
                    description=BACKEND)
    p.add_argument("--spark-remote", help="Spark Connect URL for the replicas (env SPARK_REMOTE)")
    p.add_argument("--group", default=DEFAULT_GROUP)
    p.add_argument("--share-group", default=DEFAULT_SHARE_GROUP,
                   help="the share group whose replicas `ctl share` starts beside the "
                        "consumer group (default %(default)s; none runs until asked)")
    p.add_argument("--topic", default=INPUT_TOPIC)
    p.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                   help="partitions of a topic created now (an existing one keeps its count)")
    p.add_argument("--replicas", type=int, default=3,
                   help=f"replicas to start (default 3, at most {MAX_REPLICAS})")
    p.add_argument("--protocol", choices=list(PROTOCOL_ASSIGNORS), default=DEFAULT_PROTOCOL)
    p.add_argument("--assignor", choices=assignors, default=None,
                   help="default: range (classic), uniform (consumer)")
    modes = p.add_mutually_exclusive_group()
    modes.add_argument("--exactly-once", action="store_true",
                       help=f"replicas use transactions (--commit {TRANSACTIONAL})")
    modes.add_argument("--commit", choices=tuple(COMMIT_MODES), default=None,
                       help="when replicas commit their offsets: " + commit_help())
    p.add_argument("--static", action="store_true",
                   help="replicas are static members (group.instance.id = their name)")
    p.add_argument("--max-rate", type=positive(float), default=None, metavar="N",
                   help="capacity: messages/s each replica takes at most (default: no cap)")
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
    p.add_argument("--no-standby", dest="standby", action="store_false",
                   help="keep no warm standby replica (one process, ~200 MB, that makes the "
                        "next started replica useful in about a second); there is none with "
                        "--replica-command")
    p.add_argument("--wait", type=float, default=120.0,
                   help="seconds to wait for Kafka to answer at start-up (default 120)")
    p.add_argument("--no-history", dest="history", action="store_false",
                   help="keep no memory of the groups' rebalances (<data dir>/history.sqlite)")

    ctl = add_command(
        sub, "ctl", _ctl,
        help="control the running supervisor: status, start, kill, stop, scale, ...",
        description="Talk to `groupscope backend` through its control API.")
    ctl.add_argument("--data-dir", type=Path, default=None,
                     help="the supervisor's data directory (default: env GROUPSCOPE_DATA, "
                          "./.groupscope, or the one supervisor running for this user)")
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
    o = act("options", "protocol / assignor / delivery / membership for replicas started "
            "from now on")
    o.add_argument("--protocol", choices=list(PROTOCOL_ASSIGNORS))
    o.add_argument("--assignor", choices=assignors)
    eos = o.add_mutually_exclusive_group()
    eos.add_argument("--exactly-once", dest="exactly_once", action="store_true", default=None,
                     help=f"--commit {TRANSACTIONAL}")
    eos.add_argument("--at-least-once", dest="exactly_once", action="store_false",
                     help=f"--commit {AFTER_SUMMARY}")
    eos.add_argument("--commit", choices=tuple(COMMIT_MODES), default=None,
                     help="when replicas commit their offsets: " + commit_help())
    membership = o.add_mutually_exclusive_group()
    membership.add_argument("--static", dest="static", action="store_true", default=None,
                            help="static members: a quick restart moves no partition")
    membership.add_argument("--dynamic", dest="static", action="store_false")
    act("capacity", "messages/s each replica takes at most, or off; running replicas "
        "restart with it").add_argument("max_rate", metavar="N|off")
    act("fleet", "start or stop the fleet simulator").add_argument(
        "fleet_action", choices=["start", "stop"])
    q = act("share", "the share group's replicas (KIP-932, queues) beside the consumer "
            "group's: start | kill NAME | stop NAME | restart NAME | scale N")
    q.add_argument("share_action", choices=["start", "kill", "stop", "restart", "scale"])
    q.add_argument("target", nargs="?", metavar="NAME|N")
    r = act("replay", "preview moving the group's committed offsets (per partition and per "
            "car); --apply stops the replicas, moves them and starts the replicas again")
    where = r.add_mutually_exclusive_group(required=True)
    where.add_argument("--to", choices=["earliest", "latest"])
    where.add_argument("--to-datetime", metavar="T", help="ISO 8601, or '10m ago'")
    where.add_argument("--to-offset", metavar="N", type=int)
    where.add_argument("--shift-by", metavar="N", type=int, help="negative goes back")
    r.add_argument("--partitions", metavar="P,P", help="only these (default: every one)")
    r.add_argument("--apply", action="store_true", help="do it (the preview comes first "
                   "without it)")
    act("brokers", "the Kafka nodes this stack runs, and the controller quorum's leader")
    b = act("broker", "kill (SIGKILL), stop (SIGTERM) or start one Kafka node of the stack")
    b.add_argument("broker_action", choices=list(BROKER_ACTIONS))
    b.add_argument("node", metavar="ID")


# ---- backend --------------------------------------------------------------------------------

def _fail(command: str, message: str, code: int = 2) -> int:
    print(f"groupscope {command}: {message}", file=sys.stderr)
    return code


def _backend(args: argparse.Namespace) -> int:
    import logging

    from backend.pool.processes import (
        InvalidRequest,
        default_replica_command,
        validate_options,
    )
    from backend.supervisor.api import ControlServer
    from backend.supervisor.service import ServiceConfig, SupervisorService

    logging.basicConfig(level=logging.INFO, format="%(asctime)s [backend] %(message)s",
                        stream=sys.stderr)
    if not 0 <= args.replicas <= MAX_REPLICAS:
        return _fail("backend", f"--replicas must be between 0 and {MAX_REPLICAS}")
    if args.max_rate is not None and args.max_rate > MAX_RATE:
        return _fail("backend", f"--max-rate must be at most {MAX_RATE:g}")
    if args.partitions < 1 or args.streams < 1 or args.rate < 0 or args.stop_grace <= 0:
        return _fail("backend", "--partitions and --streams must be >= 1, --rate >= 0, "
                                "--stop-grace > 0")
    try:
        options = validate_options(args.protocol, args.assignor, args.exactly_once,
                                   static=args.static, max_rate=args.max_rate,
                                   commit=args.commit)
    except InvalidRequest as exc:
        return _fail("backend", str(exc))
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
        options=options,
        replica_command=command, stop_grace=args.stop_grace, standby=args.standby,
        share_group=args.share_group, history=args.history)
    try:
        return SupervisorService(config, serve=ControlServer).run_foreground()
    except OSError as exc:
        return _fail("backend", f"cannot start: {exc}")
    except Exception as exc:  # topic errors and the like: one line, the log has the rest
        from backend.kafka.topics import TopicError

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


def _client(args: argparse.Namespace) -> ControlClient:
    from backend.supervisor.client import ControlClient, ControlError

    url, token = args.url, None
    if not url:
        discovered = ControlClient.discover(args.data_dir)
        url, token = discovered.url, discovered.token
    if args.token_file:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise ControlError(f"cannot read {args.token_file}: {exc.strerror}") from None
    return ControlClient(url=url, token=token)


def _ctl(args: argparse.Namespace) -> int:
    from backend.supervisor.client import ControlError

    if not getattr(args, "action", None):
        return _fail("ctl", "say what to do: status | start | kill NAME | stop NAME | "
                            "restart NAME | scale N | rate R | streams N | partitions P | "
                            "options ... | capacity N|off | fleet start|stop | share ... | "
                            "replay ... | brokers | broker kill|stop|start ID")
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
        print(out.model_dump_json(indent=2))
    else:
        print(_render(out))
    return 0


def _run_action(client: ControlClient, args: argparse.Namespace) -> BaseModel:
    a = args.action
    if a == "status":
        return client.status()
    if a == "start":
        return client.start()
    if a in ("kill", "stop", "restart"):
        return getattr(client, a)(args.name)
    if a == "scale":
        return client.scale(_number(args.n, "N", int))
    if a == "rate":
        return client.set_rate(_number(args.rate, "R", float))
    if a == "streams":
        return client.set_streams(_number(args.streams, "N", int))
    if a == "partitions":
        return client.add_partitions(_number(args.partitions, "P", int))
    if a == "options":
        return client.set_options(args.protocol, args.assignor, args.exactly_once, args.static,
                                  args.commit)
    if a == "replay":
        to, at, offset = _replay_target(args)
        parts = (sorted({_number(p, "P", int) for p in args.partitions.split(",") if p.strip()})
                 if args.partitions else None)
        call = client.replay if args.apply else client.replay_preview
        return call(to, at, offset, parts)
    if a == "capacity":
        off = args.max_rate.strip().lower() == "off"
        return client.set_capacity(None if off else _number(args.max_rate, "N", float))
    if a == "fleet":
        return client.fleet_start() if args.fleet_action == "start" else client.fleet_stop()
    if a == "share":
        return _share_action(client, args.share_action, args.target)
    if a == "brokers":
        return client.brokers()
    if a == "broker":
        return getattr(client, f"broker_{args.broker_action}")(_number(args.node, "ID", int))
    raise ValueError(f"unknown action {a}")


def _share_action(client: ControlClient, action: str, target: str | None) -> BaseModel:
    if action == "start":
        if target is not None:
            raise ValueError("share start takes no name (the next free one is used)")
        return client.share_start()
    if target is None:
        raise ValueError(f"share {action} needs {'N' if action == 'scale' else 'a NAME'}")
    if action == "scale":
        return client.share_scale(_number(target, "N", int))
    return getattr(client, f"share_{action}")(target)


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


def render_status(st: Status, colour: bool = False) -> str:
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
                     member, _parts(r.partitions),
                     f"{r.protocol}/{r.assignor}" + ("/static" if r.static else ""),
                     _delivery(r.commit), _cap(r.max_rate), str(r.restarts), exit_])
    for m in st.external:
        rows.append([m.client_id, "external", "-", "-", "yes", _parts(m.partitions),
                     "-", "-", "-", "-", f"host {m.host}"])
    out = [f"group {st.group} ({st.group_state or '?'}) on topic {st.topic}, "
           f"{st.partitions or '?'} partitions; {len(st.running)} replicas running"
           + (f", {len(st.external)} external" if st.external else "")]
    text = table(["NAME", "STATE", "PID", "UPTIME", "MEMBER", "PARTITIONS", "PROTOCOL",
                  "DELIVERY", "CAP", "RESTARTS", "EXIT"], rows) if rows else "(no replicas)"
    if colour and rows:
        text = _paint_names(text, [r.colour for r in st.replicas] + [m.colour for m in st.external])
    out.append(text)
    out.append(_render_options(st.options))
    if st.share is not None and st.share.replicas:
        out.append(_render_share(st.share, colour))
    if st.fleet:
        out.append(_render_fleet(st.fleet))
    if st.broker_error:
        out.append(f"broker: {st.broker_error}")
    return "\n".join(out)


def _render_share(share: ShareStatus, colour: bool) -> str:
    """The share group's replicas: several may be assigned one partition."""
    rows = [[r.name, r.state, str(r.pid or "-"), _uptime(r.started_at, r.ended_at),
             "?" if r.member is None else ("yes" if r.member else "no"),
             _parts(r.partitions), str(r.restarts),
             (r.exit_signal or f"code {r.returncode}") if r.returncode is not None else "-"]
            for r in share.replicas]
    text = table(["NAME", "STATE", "PID", "UPTIME", "MEMBER", "PARTITIONS", "RESTARTS",
                  "EXIT"], rows)
    if colour:
        text = _paint_names(text, [r.colour for r in share.replicas])
    return (f"share group {share.group} ({share.group_state or '?'}): "
            f"{len(share.running)} replicas running, {share.members} members\n{text}")


def _delivery(commit: str) -> str:
    return COMMIT_GUARANTEES.get(commit, commit)


def _cap(max_rate: float | None) -> str:
    return "-" if max_rate is None else f"{max_rate:g}/s"


def _render_capacity(max_rate: float | None) -> str:
    return "no cap" if max_rate is None else f"at most {max_rate:g} msg/s each"


def _render_options(o: ReplicaOptions) -> str:
    membership = "static" if o.static else "dynamic"
    return (f"new replicas: {o.protocol}/{o.assignor}, {_delivery(o.commit)}, "
            f"{membership}; capacity: {_render_capacity(o.max_rate)}")


def _render_fleet(f: FleetState) -> str:
    target = "unlimited" if f.target_rate is None else f"{f.target_rate:g}"
    return (f"fleet: {'running' if f.running else 'stopped'}, {f.streams} streams, "
            f"target {target} msg/s, measured {f.rate} msg/s, "
            f"{f.delivered} delivered, {f.failed} failed")


def _replay_target(args: argparse.Namespace) -> tuple[str, str | None, int | None]:
    """(to, at, offset) of the API's ReplayRequest from `ctl replay`'s one target option."""
    if args.to:
        return args.to, None, None
    if args.to_datetime:
        return "datetime", args.to_datetime, None
    if args.to_offset is not None:
        return "offset", None, args.to_offset
    return "shift", None, args.shift_by


def render_replay(p: ReplayPreview, applied: bool = False) -> str:
    """A replay's plan: per partition, then per car, then the totals."""
    head = (f"{'REPLAYED' if applied else 'PREVIEW (nothing changed)'}: group {p.group} on "
            f"{p.topic} to {p.target}" + (f" (pin it: --to-datetime {p.pinned_at})"
                                          if p.pinned_at and not applied else ""))
    parts = table(["P", "COMMITTED", "NEW", "LOG START", "LOG END", "REPLAYS", "SKIPS",
                   "NOTE"], [[str(m.partition), _dash(m.committed), _dash(m.new),
                              str(m.log_start), str(m.log_end), str(m.replays),
                              str(m.skips), m.note] for m in p.partitions])
    out = [head, parts]
    if p.cars:
        out.append(table(["CAR", "P", "REPLAYS", "SKIPS"],
                         [[c.car, str(c.partition), str(c.replays), str(c.skips)]
                          for c in p.cars]))
        if not p.cars_complete:
            out.append("(per car: only the first records were read; the totals are exact)")
    out.append(f"replays {p.replays} records, skips {p.skips}; the group is {p.group_state}")
    return "\n".join(out)


def _dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _render(out: BaseModel) -> str:
    """One answer of the control API as the lines a person reads."""
    if isinstance(out, Status):
        return render_status(out, colour=_want_colour())
    if isinstance(out, ReplayPreview):
        return render_replay(out) + "\nadd --apply to do it: the replicas stop, the offsets " \
                                    "move, the replicas start again"
    if isinstance(out, ReplayAnswer):
        tail = [f"stopped {', '.join(out.stopped) or 'none'}; started "
                f"{', '.join(out.started) or 'none'}",
                "every offset reads back as planned" if out.read_back_matches
                else "READ BACK DIFFERS from the plan"]
        return "\n".join([render_replay(out.applied, applied=True), *out.refused, *tail])
    if isinstance(out, ReplicaInfo):
        return f"{out.name}: {out.state} (pid {out.pid})"
    if isinstance(out, BrokerNode):
        return f"broker {out.id}: {'up' if out.alive else 'down'} (pid {out.pid or '-'})"
    if isinstance(out, BrokersAnswer):
        rows = [[str(n.id), "up" if n.alive else "down", str(n.port),
                 "voter" + (" (leader)" if n.id == out.quorum_leader else "")
                 if n.controller else "broker only", str(n.pid or "-")] for n in out.brokers]
        return table(["ID", "STATE", "PORT", "QUORUM", "PID"], rows)
    if isinstance(out, ScaleAnswer):
        parts = []
        if out.started:
            parts.append("started " + ", ".join(out.started))
        if out.stopping:
            parts.append("stopping " + ", ".join(out.stopping))
        return "; ".join(parts) or "already at that size"
    if isinstance(out, FleetState):
        return _render_fleet(out)
    if isinstance(out, ReplicaOptions):
        return _render_options(out)
    if isinstance(out, CapacityAnswer):
        restarting = (f"; restarting {', '.join(out.restarting)}" if out.restarting
                      else "; no running replica to restart")
        return f"capacity: {_render_capacity(out.options.max_rate)}{restarting}"
    if isinstance(out, PartitionChange):
        head = (f"{out.topic}: {out.before} -> {out.after} partitions; "
                f"{len(out.moved)} of {out.streams_checked} streams now land on a "
                f"different partition")
        if not out.moved:
            return head
        rows = [[m.stream, str(m.was), str(m.now)] for m in out.moved]
        return head + "\n" + table(["STREAM", "WAS", "NOW"], rows)
    return out.model_dump_json()
