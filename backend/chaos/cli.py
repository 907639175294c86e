"""`groupscope chaos`: disrupt real replicas under load, drain, and verify every stream.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
chaos run, the supervisor's process pool and the broker's node control (about 0.1 s), which
only `chaos` uses.
"""

from __future__ import annotations

import argparse

from backend.cli_common import UserError, add_command, positive
from backend.contracts import COMMIT_MODES, commit_help
from backend.contracts.control import DEFAULT_PROTOCOL, PROTOCOL_ASSIGNORS
from backend.kafka.settings import resolve_settings
from backend.paths import data_dir
from backend.spark.session import answering_engine

CHAOS_HELP = "kill, stop, start and scale replicas under load; verify nothing is lost"
CHAOS = ("Runs real replicas on a fresh topic and group, produces telemetry, and "
         "at random (seeded) moments kills (SIGKILL), stops, starts and scales "
         "them. Then drains and checks every stream's summary against what was "
         "produced. Exit code 1 when a message was lost (or, with --exactly-once, "
         "counted twice); with a careless --commit mode (auto, before-processing) the "
         "records it lost are reported as what that mode costs, not as a failure. Needs "
         "Kafka and the Spark engine (e.g. `groupscope up`).")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "chaos", _chaos, cluster=True, help=CHAOS_HELP,
                    description=CHAOS)
    p.add_argument("--spark-remote", metavar="URL", help="Spark Connect URL (default: the "
                   "embedded engine, or SPARK_REMOTE)")
    p.add_argument("--duration", type=positive(float), default=60.0, metavar="S",
                   help="seconds of disruption before draining (default 60)")
    p.add_argument("--rate", type=positive(float), default=500.0, help="msg/s (default 500)")
    p.add_argument("--streams", type=positive(int), default=24, help="cars (default 24)")
    p.add_argument("--partitions", type=positive(int), default=6, help="default 6")
    p.add_argument("--replicas", type=positive(int), default=3, help="at start (default 3)")
    p.add_argument("--min-replicas", type=positive(int), default=1, help="default 1")
    p.add_argument("--max-replicas", type=positive(int), default=5, help="default 5")
    p.add_argument("--every", type=positive(float), nargs=2, default=(4.0, 9.0),
                   metavar=("MIN", "MAX"), help="seconds between actions (default 4 9)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--protocol", choices=sorted(PROTOCOL_ASSIGNORS), default=DEFAULT_PROTOCOL)
    p.add_argument("--assignor", help="default: the protocol's first (" + "; ".join(
        f"{protocol}: {assignors[0]}" for protocol, assignors in PROTOCOL_ASSIGNORS.items()) + ")")
    modes = p.add_mutually_exclusive_group()
    modes.add_argument("--exactly-once", action="store_true",
                       help="transactional replicas (--commit transactional)")
    modes.add_argument("--commit", choices=tuple(COMMIT_MODES), default=None,
                       help=f"when the replicas commit: {commit_help()}")
    p.add_argument("--drain-timeout", type=positive(float), default=180.0, metavar="S")
    p.add_argument("--broker-kills", action="store_true",
                   help="also SIGKILL a Kafka node of the stack's cluster every 10-16 s and "
                        "start it again 5-9 s later (needs `groupscope broker --brokers 3`, "
                        "e.g. `up --brokers 3`)")
    p.add_argument("--share", action="store_true",
                   help="share-group replicas (queues, KIP-932) instead of a consumer group: "
                        "verified from their deltas; a duplicate must be a redelivery")
    p.add_argument("--name", help="group/topic prefix (default chaos-<epoch seconds>)")
    p.add_argument("--json", metavar="PATH", help="also write the report as JSON")


def _chaos(args: argparse.Namespace) -> int:
    import os
    import time
    from pathlib import Path

    import orjson

    from backend.chaos.report import render, to_dict
    from backend.chaos.run import ChaosConfig, ChaosRun
    from backend.pool.processes import InvalidRequest, validate_options

    if not args.min_replicas <= args.replicas <= args.max_replicas:
        raise UserError("need --min-replicas <= --replicas <= --max-replicas")
    if args.every[0] > args.every[1]:
        raise UserError("--every MIN MAX needs MIN <= MAX")
    if args.share and (args.exactly_once or args.commit or args.assignor or args.broker_kills):
        raise UserError("--share runs share-group replicas: --exactly-once, --commit, "
                        "--assignor and --broker-kills apply to a consumer group")
    try:
        options = validate_options(args.protocol, args.assignor, args.exactly_once,
                                   commit=args.commit)
    except InvalidRequest as exc:
        raise UserError(str(exc)) from None
    settings = resolve_settings(args.bootstrap, args.kafka_config)
    settings.check_reachable(timeout=10.0)
    remote = answering_engine(args.spark_remote)
    brokers = None
    if args.broker_kills:
        from backend.broker.nodes import ClusterError, MailboxCluster

        try:
            brokers = MailboxCluster(Path(data_dir()) / "broker")
        except ClusterError as exc:
            raise UserError(f"--broker-kills: {exc}") from None
        if len(brokers.node_ids()) < 3:
            raise UserError("--broker-kills needs a cluster of three nodes or more "
                            "(`groupscope up --brokers 3`): with fewer, a node down stops "
                            "every write")
    name = args.name or f"chaos-{int(time.time())}"
    config = ChaosConfig(
        duration_s=args.duration, rate=args.rate, streams=args.streams,
        partitions=args.partitions, start_replicas=args.replicas,
        min_replicas=args.min_replicas, max_replicas=args.max_replicas,
        every_s=tuple(args.every), seed=args.seed, options=options,
        drain_timeout_s=args.drain_timeout, name=name, broker_kills=args.broker_kills,
        share=args.share)
    log_dir = Path(data_dir()) / "chaos" / name
    kafka_config = args.kafka_config or os.environ.get("GROUPSCOPE_KAFKA_CONFIG") or None
    try:
        report = ChaosRun(settings, remote, config, log_dir, kafka_config=kafka_config,
                          progress=lambda line: print(line, flush=True),
                          brokers=brokers).execute()
    finally:
        if brokers is not None:  # the last node started again is up, or said why not
            brokers.started()
    print(render(report))
    print(f"replica logs: {log_dir}")
    if args.json:
        Path(args.json).write_bytes(orjson.dumps(to_dict(report), option=orjson.OPT_INDENT_2))
    return 0 if report.ok else 1
