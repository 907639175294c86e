"""`groupscope produce`: run the car fleet in the foreground, with a progress line per second.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
topic administration (backend/kafka/topics.py), which only `produce` uses here.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import NoReturn

from backend.cli_common import UserError, add_command, positive
from backend.contracts import DEFAULT_PARTITIONS, INPUT_TOPIC
from backend.fleet.recovery import RecoveryError
from backend.fleet.simulator import DEFAULT_RATE, DEFAULT_STREAMS, FLUSH_TIMEOUT_S, FleetSimulator
from backend.kafka.settings import resolve_settings
from backend.proc import STOP_BUDGET_S, StopSignals


def _rate(text: str) -> float:
    """Messages per second above 0, or 'max' for as fast as the broker takes them."""
    if text.lower() in ("max", "unlimited", "inf"):
        return math.inf
    return positive(float)(text)


PRODUCE = ("Produce telemetry for N cars (streams car-NN chosen to cover the default "
           "partitions; key = stream id, murmur2 partitioner) at a total rate. Each stream's "
           "seq resumes from the topic. Creates the topic if missing. Ctrl-C flushes and exits.")


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(sub, "produce", _produce, cluster=True, description=PRODUCE,
                    help="run the car fleet simulator (keyed telemetry, murmur2)")
    p.add_argument("--topic", default=INPUT_TOPIC, help=f"input topic (default {INPUT_TOPIC})")
    p.add_argument("--streams", type=positive(int), default=DEFAULT_STREAMS,
                   help=f"number of cars (default {DEFAULT_STREAMS})")
    p.add_argument("--rate", type=_rate, default=DEFAULT_RATE,
                   help=f"total msg/s, or 'max' (default {DEFAULT_RATE:g})")
    p.add_argument("--partitions", type=positive(int), default=DEFAULT_PARTITIONS,
                   help=f"partitions if the topic is created (default {DEFAULT_PARTITIONS})")
    p.add_argument("--replication", type=positive(int), default=1,
                   help="replication factor if the topic is created (default 1)")
    p.add_argument("--duration", type=positive(float), metavar="S", help="stop after S seconds")
    p.add_argument("--count", type=positive(int), metavar="N", help="stop after N messages")


def _interrupt() -> NoReturn:
    raise KeyboardInterrupt


def _produce(args: argparse.Namespace) -> int:
    from backend.kafka.topics import TopicError, ensure_input_topic

    settings = resolve_settings(args.bootstrap, args.kafka_config)
    settings.check_reachable(timeout=10.0)
    try:
        info = ensure_input_topic(settings, args.topic, args.partitions, args.replication)
    except TopicError as exc:
        raise UserError(str(exc)) from None
    if not info.created and info.partitions != args.partitions:
        print(f"note: {info.name} already exists with {info.partitions} partitions; "
              f"--partitions {args.partitions} only applies when creating it", flush=True)
    rate = "max" if math.isinf(args.rate) else f"{args.rate:g} msg/s"
    print(f"producing to {info.name} ({info.partitions} partitions) on {settings.describe()}: "
          f"{args.streams} streams at {rate}; Ctrl-C to stop", flush=True)

    sim = FleetSimulator(settings, args.topic, streams=args.streams, rate=args.rate,
                         limit=args.count)
    # The first SIGINT/SIGTERM raises KeyboardInterrupt; later ones change nothing, so a
    # second Ctrl-C does not cut the flush short (StopSignals' watchdog bounds it instead).
    with StopSignals(on_stop=_interrupt):
        try:
            sim.start()
        except RecoveryError as exc:
            raise UserError(str(exc)) from None
        resumed = sim.stats().resumed_from
        if any(resumed.values()):
            print(f"resuming streams from seq {min(resumed.values())}..{max(resumed.values())}",
                  flush=True)
        started = time.monotonic()
        interrupted = unexpected = False
        try:
            while True:
                if not sim.running:
                    unexpected = args.count is None or not sim.wait_finished(0)
                    break
                if args.duration is not None and time.monotonic() - started >= args.duration:
                    break
                finished = sim.wait_finished(timeout=1.0)
                st = sim.stats()
                print(f"  {time.monotonic() - started:6.1f} s  {st.delivered:9d} delivered  "
                      f"{st.rate:8.1f} msg/s  queued {st.queued}", flush=True)
                if st.last_error:
                    print(f"  warning: {st.last_error}", file=sys.stderr, flush=True)
                if finished:
                    break
        except KeyboardInterrupt:
            interrupted = True
        finally:
            # stopped by a signal: the flush gets what is left of the stop budget (with the
            # broker gone it would otherwise wait its full time-out)
            final = sim.stop(STOP_BUDGET_S - 1.0 if interrupted else FLUSH_TIMEOUT_S)
    seqs = final.next_seq.values()
    print(f"{'interrupted' if interrupted else 'done'}: {final.delivered} messages delivered to "
          f"{final.topic} for {final.streams} streams (next seq {min(seqs)}..{max(seqs)}), "
          f"{final.failed} failed", flush=True)
    if final.last_error:
        print(f"warning: {final.last_error}", file=sys.stderr)
    return 1 if final.failed or unexpected else 0
