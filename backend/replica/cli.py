"""`groupscope replica`: run one member of the consumer group, or with `--share` of the share
group beside it.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
replica's runners and Spark summariser (pyarrow), which only `replica` uses, and a standby
loads them before its order comes.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

from backend.cli_common import UserError, add_cluster_args, add_command, positive
from backend.contracts import (
    AFTER_SUMMARY,
    COMMIT_MODES,
    DEFAULT_GROUP,
    DEFAULT_SHARE_GROUP,
    INPUT_TOPIC,
    TRANSACTIONAL,
    commit_help,
)
from backend.contracts.control import (
    DEFAULT_PROTOCOL,
    PROTOCOL_ASSIGNORS,
    STANDBY_KEEP_ALIVE_S,
    STANDBY_READY,
    GroupChoiceError,
    StandbyOrder,
    resolve_commit,
)
from backend.errors import one_line
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import ClusterUnreachable, resolve_settings
from backend.proc import StopSignals
from backend.replica.membership import GroupChoice, MembershipConfigError
from backend.spark.session import ENV_TOKEN, EngineUnavailable, check_engine

if TYPE_CHECKING:  # pyspark and pyarrow load only when a replica really runs
    from backend.replica.spark_summary import SparkSummariser


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "replica", _replica, help="run one PySpark consumer replica of the group",
        description="Join the consumer group, summarise every stream with Spark in "
                    "micro-batches, keep per-stream summaries in a compacted changelog, and "
                    "publish telemetry events. SIGTERM stops gracefully.")
    p.add_argument("--id", required=True, metavar="NAME", help="replica name (= client.id)")
    p.add_argument("--group", default=None,
                   help=f"default {DEFAULT_GROUP} ({DEFAULT_SHARE_GROUP} with --share)")
    p.add_argument("--share", action="store_true",
                   help="join a share group (KIP-932, queues: Preview in librdkafka) "
                        "instead: members take records of the same partitions, each "
                        "acknowledged once its summary is written; no ordering per stream")
    p.add_argument("--topic", default=INPUT_TOPIC)
    # no argparse choices: a wrong protocol is the one-line error of GroupChoice.parse
    p.add_argument("--protocol", default=None,
                   help=f"{' or '.join(PROTOCOL_ASSIGNORS)} (KIP-848); default "
                        f"{DEFAULT_PROTOCOL}")
    p.add_argument("--assignor", default=None, help="; ".join(
        f"{protocol}: {', '.join(assignors)} (default {assignors[0]})"
        for protocol, assignors in PROTOCOL_ASSIGNORS.items()))
    p.add_argument("--commit", choices=tuple(COMMIT_MODES), default=None,
                   help=f"when offsets are committed: {commit_help()} (default "
                        f"{AFTER_SUMMARY})")
    p.add_argument("--exactly-once", action="store_true",
                   help=f"the same as --commit {TRANSACTIONAL}")
    p.add_argument("--static", action="store_true",
                   help="static membership: group.instance.id = --id, so a restart within "
                        "the session timeout takes the same partitions back without a "
                        "rebalance (and a stopped or crashed replica holds them until then)")
    p.add_argument("--max-rate", type=positive(float), default=None, metavar="N",
                   help="take at most N messages/s on average (default: no cap); at the "
                        "cap it waits, taking nothing, but stays in the group")
    p.add_argument("--spark-remote", default=None, help="Spark Connect URL (env SPARK_REMOTE)")
    p.add_argument("--spark-token", default=None, metavar="TOKEN",
                   help="the Spark Connect token of a workshop room (env GROUPSCOPE_SPARK_TOKEN, "
                        "which keeps it out of the process list)")
    p.add_argument("--batch-ms", type=int, default=1000, help="micro-batch interval (ms)")
    p.add_argument("--batch-max", type=int, default=20_000, help="max records per micro-batch")
    p.add_argument("--feed", choices=("typed", "raw"), default="typed",
                   help="typed: parse JSON once in Python, ship typed Arrow columns (default, "
                        "faster in bench/replica_batch.py); raw: ship the JSON strings and "
                        "parse them in Spark")
    p.add_argument("--standby", action="store_true",
                   help="get ready before having a name: import, open a Spark session and "
                        "compile the batch query, then wait for one JSON line on stdin "
                        "({\"argv\": [the replica's arguments], \"log\": file}) and run as "
                        "that replica; the supervisor keeps one, so a started replica is "
                        "useful in about a second")
    add_cluster_args(p)  # after the replica's own options in its --help
    p.set_defaults(parser=p)


def _standby(args: argparse.Namespace) -> int:
    """Warm up as far as a replica can without its name and options, then become the
    replica the supervisor's order names. A standby that cannot warm up (Spark down) still
    waits: the replica it becomes warms up itself, as one started cold would."""
    import select

    from pydantic import ValidationError

    # the replica's own modules (Kafka clients, Arrow, the runner) load now, not on order
    import backend.replica.runner  # noqa: F401
    from backend.replica.spark_summary import SparkSummariser

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    for noisy in ("py4j", "pyspark", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    log = logging.getLogger("groupscope.replica")
    started = time.monotonic()
    spark = SparkSummariser(args.spark_remote)
    try:
        spark.warm_up(typed=args.feed == "typed", both_plans=True)
    except Exception as exc:  # the replica it becomes retries with backoff and reports
        spark.reset()
        log.warning("standby: no Spark warm-up (%s); the replica will warm up itself",
                    one_line(exc))
    log.info("%s in %.2f s", STANDBY_READY, time.monotonic() - started)
    while True:  # a keep-alive every minute: the engine drops sessions idle for 3 (server.py)
        ready, _, _ = select.select([sys.stdin], [], [], STANDBY_KEEP_ALIVE_S)
        if ready:
            break
        if spark.warm:
            try:
                spark.keep_alive()
            except Exception:
                spark.reset()
    line = sys.stdin.readline()
    if not line:  # the supervisor went away, or shut down before needing it
        return 0
    try:
        order = StandbyOrder.model_validate_json(line)
    except ValidationError as exc:
        print(f"groupscope replica --standby: not an order: {one_line(exc)}",
              file=sys.stderr)
        return 2
    if order.log:
        fd = os.open(order.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, sys.stdout.fileno())
        os.dup2(fd, sys.stderr.fileno())
        os.close(fd)
    real = args.parser.parse_args(order.argv)
    if order.title:  # `ps`, psutil and the soak's process roles see the replica it now is
        import setproctitle

        setproctitle.setproctitle(order.title)
    if real.standby:
        print("groupscope replica --standby: the order is for another standby, not a replica",
              file=sys.stderr)
        return 2
    if real.spark_remote != args.spark_remote or real.feed != args.feed:
        spark.reset()  # warmed for another engine or feed: the replica warms its own
        spark = None
    log.info("standby %d becomes replica %s after %.2f s in standby", os.getpid(), real.id,
             time.monotonic() - started)
    return _replica(real, spark)


def commit_mode(commit: str | None, exactly_once: bool) -> str:
    """--commit, with --exactly-once its older spelling of `transactional`."""
    try:
        return resolve_commit(commit, True if exactly_once else None) or AFTER_SUMMARY
    except GroupChoiceError:  # argparse's choices leave only the pair's conflict
        raise UserError(f"--exactly-once means --commit {TRANSACTIONAL}, not {commit}: "
                        "give one of them") from None


def _replica(args: argparse.Namespace, spark: SparkSummariser | None = None) -> int:
    if args.standby:
        return _standby(args)
    if args.share:
        return _share_replica(args, spark)
    args.group = args.group or DEFAULT_GROUP
    try:
        choice = GroupChoice.parse(args.protocol or DEFAULT_PROTOCOL, args.assignor)
        if args.batch_ms <= 0 or args.batch_max <= 0:
            raise UserError("--batch-ms and --batch-max must be positive")
        if not args.id.strip():
            raise UserError("--id must not be empty")
        commit = commit_mode(args.commit, args.exactly_once)
    except (MembershipConfigError, UserError) as exc:
        print(f"groupscope replica: {exc}", file=sys.stderr)
        return 2

    from backend.replica.runner import Replica, ReplicaConfig, default_context

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    for noisy in ("py4j", "pyspark", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    if args.spark_token:  # the session factory reads it from there, in this process only
        os.environ[ENV_TOKEN] = args.spark_token
    try:
        settings = resolve_settings(args.bootstrap, args.kafka_config)
        settings.check_reachable(timeout=15.0)
        if os.environ.get(ENV_TOKEN):  # a room's engine: a wrong token is said now, not later
            check_engine(args.spark_remote, timeout=15.0)
    except (KafkaConfigError, ClusterUnreachable, EngineUnavailable) as exc:
        print(f"groupscope replica: {exc}", file=sys.stderr)
        return 2
    cfg = ReplicaConfig(name=args.id, group=args.group, topic=args.topic, choice=choice,
                        commit=commit, spark_remote=args.spark_remote,
                        batch_ms=args.batch_ms, batch_max=args.batch_max, feed=args.feed,
                        static=args.static, max_rate=args.max_rate)
    from backend.kafka.topics import TopicError

    try:
        return Replica(cfg, settings, default_context(), spark=spark).run()
    except TopicError as exc:
        print(f"groupscope replica: {exc}", file=sys.stderr)
        return 2


# the options that only mean something to a consumer group's member, with their defaults
CONSUMER_GROUP_ONLY = {"protocol": None, "assignor": None, "commit": None,
                       "exactly_once": False, "static": False, "max_rate": None,
                       "feed": "typed", "standby": False}


def _share_replica(args: argparse.Namespace, spark: SparkSummariser | None) -> int:
    """`--share`: a share-group member (backend/replica/share_runner.py)."""
    given = [f"--{k.replace('_', '-')}" for k, default in CONSUMER_GROUP_ONLY.items()
             if getattr(args, k) != default]
    if given:
        print(f"groupscope replica: {', '.join(given)} apply to a consumer group, not to "
              "--share (a share group acknowledges each record; it has no assignor, "
              "commits or static members)", file=sys.stderr)
        return 2
    if not args.id.strip() or args.batch_max <= 0 or args.batch_ms <= 0:
        print("groupscope replica: --id must not be empty, --batch-ms and --batch-max "
              "positive", file=sys.stderr)
        return 2

    if args.spark_token:  # the session factory reads it from there, in this process only
        os.environ[ENV_TOKEN] = args.spark_token
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stdout)
    for noisy in ("py4j", "pyspark", "grpc"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from backend.kafka.topics import TopicError
    from backend.replica.share_runner import ShareReplica, ShareReplicaConfig

    try:
        settings = resolve_settings(args.bootstrap, args.kafka_config)
        settings.check_reachable(timeout=15.0)
        replica = ShareReplica(ShareReplicaConfig(
            name=args.id, group=args.group or DEFAULT_SHARE_GROUP, topic=args.topic,
            spark_remote=args.spark_remote, max_records=args.batch_max,
            poll_s=args.batch_ms / 1000.0), settings, spark)
        replica.setup()
    except (KafkaConfigError, ClusterUnreachable, TopicError) as exc:
        print(f"groupscope replica: {exc}", file=sys.stderr)
        return 2
    with StopSignals(on_stop=replica.stop):
        replica.run()
    return 0
