"""`groupscope lab`: the rebalance protocols side by side, headless, with a scoreboard.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
lab's run, the supervisor's process pool and the fleet, which only `lab` uses.
"""

from __future__ import annotations

import argparse

from backend.cli_common import UserError, add_command, positive
from backend.contracts.lab import (
    DEFAULT_LAB_PROTOCOLS,
    KILL,
    LAB_EVENTS,
    LAB_PROTOCOLS,
    MAX_LAB_GROUPS,
)
from backend.kafka.settings import resolve_settings
from backend.paths import data_dir
from backend.spark.session import answering_engine

LAB_HELP = "the rebalance protocols side by side: one event, every group, a scoreboard"
LAB = ("Runs one group of real replicas per protocol on one fresh topic, applies one event to "
       "every group at the same instant, and measures from the batches each group processed "
       "how long its partitions stalled, how many changed hands and how many records were "
       "processed twice. Needs Kafka and the Spark engine (e.g. `groupscope up`). Protocols: "
       + "; ".join(f"{p.name} = {p.title}" for p in LAB_PROTOCOLS.values()) + ". Events: "
       + "; ".join(f"{k} = {v}" for k, v in LAB_EVENTS.items()) + ".")


def _protocols(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in LAB_PROTOCOLS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown protocol {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(LAB_PROTOCOLS)}, separated by commas")
    if len(names) > MAX_LAB_GROUPS:
        raise argparse.ArgumentTypeError(f"at most {MAX_LAB_GROUPS} protocols at once")
    return names


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "lab", _lab, cluster=True, help=LAB_HELP, description=LAB)
    p.add_argument("--spark-remote", metavar="URL", help="Spark Connect URL (default: the "
                   "embedded engine, or SPARK_REMOTE)")
    p.add_argument("--protocols", type=_protocols, default=DEFAULT_LAB_PROTOCOLS,
                   metavar="A,B,...", help="the groups to compare (default "
                   f"{','.join(DEFAULT_LAB_PROTOCOLS)})")
    p.add_argument("--event", choices=tuple(LAB_EVENTS), default=KILL,
                   help=f"what happens to every group (default {KILL})")
    p.add_argument("--partitions", type=positive(int), default=6, help="default 6")
    p.add_argument("--replicas", type=positive(int), default=3, help="a group (default 3)")
    p.add_argument("--reps", type=positive(int), default=1,
                   help="repetitions, each on a fresh topic and groups (default 1)")
    p.add_argument("--rate", type=positive(float), default=300.0,
                   help="msg/s into the topic, which every group reads (default 300)")
    p.add_argument("--streams", type=positive(int), default=None,
                   help="cars (default four a partition, at least 24)")
    p.add_argument("--batch-ms", type=positive(int), default=500, metavar="MS",
                   help="the replicas' batch interval (default 500; longer batches keep "
                        "hundreds of partitions each fed within a batch)")
    p.add_argument("--max-window", type=positive(float), default=120.0, metavar="S",
                   help="the longest a measurement waits for every group to recover "
                        "(default 120)")
    p.add_argument("--name", help="topic and group prefix (default lab-<epoch seconds>)")
    p.add_argument("--json", metavar="PATH", help="also write every repetition as JSON")


def _lab(args: argparse.Namespace) -> int:
    import os
    import time
    from pathlib import Path

    import orjson
    from confluent_kafka import KafkaException

    from backend.errors import one_line
    from backend.kafka.topics import TopicError
    from backend.lab.report import table, to_dict
    from backend.lab.run import LabConfig, LabError, LabRun

    settings = resolve_settings(args.bootstrap, args.kafka_config)
    settings.check_reachable(timeout=10.0)
    remote = answering_engine(args.spark_remote)
    name = args.name or f"lab-{int(time.time())}"
    kafka_config = args.kafka_config or os.environ.get("GROUPSCOPE_KAFKA_CONFIG") or None
    results = []
    config = LabConfig()
    failed: str | None = None
    for rep in range(1, args.reps + 1):
        config = LabConfig(protocols=args.protocols, event=args.event,
                           partitions=args.partitions, replicas=args.replicas,
                           streams=args.streams, rate=args.rate,
                           max_window_s=args.max_window, batch_ms=args.batch_ms,
                           name=name if args.reps == 1 else f"{name}-r{rep}")
        print(f"lab: repetition {rep} of {args.reps}", flush=True)
        try:
            results.append(LabRun(settings, remote, config,
                                  Path(data_dir()) / "lab" / config.name,
                                  kafka_config=kafka_config,
                                  progress=lambda line: print(line, flush=True)).execute())
        except (LabError, TopicError) as exc:  # a topic refused, or not ready in time
            failed = f"repetition {rep}: {exc}"
        except KafkaException as exc:  # the broker stopped answering the lab's own reads
            failed = (f"repetition {rep}: the lab lost the cluster at {settings.bootstrap}: "
                      f"{one_line(exc)}")
        if failed:
            break
    if results:  # the repetitions measured are kept, whatever happened to a later one
        print(table(config, results))
        if args.json:
            Path(args.json).write_bytes(orjson.dumps(to_dict(config, results),
                                                     option=orjson.OPT_INDENT_2))
    print(f"replica logs: {Path(data_dir()) / 'lab'}")
    if failed:
        raise UserError(failed + (f" ({len(results)} measured before it, shown above)"
                                  if results else ""))
    return 0
