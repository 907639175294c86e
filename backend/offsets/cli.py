"""`groupscope offsets reset|delete`: move or delete a group's committed offsets, preview first.

This module does the I/O around `plan.py`, which decides. Reads go through the reading layer
(`KafkaReader`: the group's type and state, committed offsets, log start and end, offsets
for a time). The one write (reset.apply: confluent-kafka's alter for a consumer group,
Kafka's Java Admin in a one-shot JVM for a share group's start offsets and for a delete,
which confluent-kafka does not wrap) is made only with `--execute` and only after every
check has passed, so a preview can never change anything, whatever goes wrong in it.

Kafka accepts offsets committed from outside a group only while the group is Empty (its
members would overwrite them, and the broker refuses the commit anyway), so `--execute`
checks that first and refuses in one line otherwise. After writing, the committed offsets
are read back through the same reader the preview used, and any difference from the plan
fails the command: a reset that reports success must have done exactly what it showed.

Imports inside functions keep `groupscope --help` and the other subcommands from loading the
Java Admin reader (backend/kafka/javaadmin), which only `offsets` uses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from backend.cli_common import UserError, add_command
from backend.contracts.history import HISTORY_FILE
from backend.history.cli import default_path
from backend.observer.cli import cluster_settings
from backend.offsets.plan import (
    TP,
    Plan,
    TopicSpec,
    change_lines,
    choose_target,
    differences,
    format_ms,
    format_plan,
    merge_specs,
    parse_topic_spec,
    plan_delete,
    plan_dict,
    select_partitions,
    summary,
)
from backend.offsets.reset import (
    Group,
    apply,
    extents,
    plan_reset_now,
    refuse_other_types,
    topic_counts,
)

if TYPE_CHECKING:
    from backend.kafka.javaadmin.reader import KafkaReader

EXIT_FAILED = 1  # something may have changed: read the output
EXIT_REFUSED = 2  # nothing changed (also what main() returns for a UserError)


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "offsets", None,
        help="reset or delete a consumer group's committed offsets (preview first)",
        description="Move a consumer group's committed offsets (reset) or delete them. "
                    "Without --execute only a preview is printed and nothing changes: per "
                    "partition the committed and new offset, the log's start and end, and "
                    "how many records the change replays or skips.")
    verbs = p.add_subparsers(dest="verb", metavar="ACTION")

    reset = add_command(
        verbs, "reset", _reset, cluster=True, help="move committed offsets to a target",
        description="Reset a group's committed offsets to exactly one target. Offsets are "
                    "clamped into [log start, log end], as Kafka does, and the preview says "
                    "so. --execute applies the previewed offsets to an Empty group.")
    _common(reset)
    target = reset.add_argument_group("target (exactly one)")
    target.add_argument("--to", metavar="earliest|latest",
                        help="the log start, or the log end")
    target.add_argument("--to-datetime", metavar="T",
                        help="the first record at or after T: ISO 8601 (2026-05-01T09:30:00, "
                             "optionally with Z or +02:00; none is local time) or '10m ago', "
                             "'2h ago', '1d ago'. A partition with no record at or after T "
                             "goes to its log end, and the preview says so")
    target.add_argument("--to-offset", metavar="N", type=_integer,
                        help="offset N in every chosen partition (clamped into the log)")
    target.add_argument("--shift-by", metavar="N", type=_integer,
                        help="N from the committed offset; negative moves back (replays)")

    delete = add_command(
        verbs, "delete", _delete, cluster=True, help="delete the committed offsets of a topic",
        description="Delete a group's committed offsets for a topic (KIP-496 OffsetDelete): "
                    "its next consumer then starts where its auto.offset.reset says. "
                    "--execute applies it to an Empty group.")
    _common(delete, topic_required=True)
    p.set_defaults(func=lambda args: _no_verb(p))


def _common(p: argparse.ArgumentParser, topic_required: bool = False) -> None:
    p.add_argument("--group", required=True, help="the consumer group")
    p.add_argument("--topic", action="append", default=[], metavar="T[:P,P]",
                   required=topic_required,
                   help="only this topic, or these partitions of it (repeatable)"
                        + ("" if topic_required else "; default: every partition the group "
                                                     "has committed offsets for"))
    p.add_argument("--execute", action="store_true",
                   help="apply the change (default: preview only; the group must be Empty)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--history", metavar="PATH", type=Path,
                   help=f"the memory whose audit keeps what --execute changed (default: "
                        f"{HISTORY_FILE} in the data directory)")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _no_verb(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return EXIT_REFUSED


# ---- reading ------------------------------------------------------------------------------

def _specs(args: argparse.Namespace) -> list[TopicSpec]:
    return merge_specs([parse_topic_spec(text) for text in args.topic])


# ---- commands -----------------------------------------------------------------------------

def _reset(args: argparse.Namespace) -> int:
    target = choose_target(args.to, args.to_datetime, args.to_offset, args.shift_by,
                           datetime.now(UTC))
    specs = _specs(args)

    def plan_with(reader: KafkaReader, group: Group) -> Plan:
        return plan_reset_now(reader, group, target, specs)

    pin = None
    if target.kind == "datetime" and target.given != format_ms(target.value):
        pin = f"--to-datetime {format_ms(target.value)}"
    return _run(args, "reset", plan_with, pin)


def _delete(args: argparse.Namespace) -> int:
    specs = _specs(args)

    def plan_with(reader: KafkaReader, group: Group) -> Plan:
        committed = group.committed_or_refuse()
        tps = select_partitions(group.name, committed, specs, topic_counts(reader, specs),
                                every_partition=False)
        plan = plan_delete(group.name, tps, committed, extents(reader, tps))
        if not plan.rows:
            raise UserError(f"group {group.name} has no committed offsets in "
                            f"{', '.join(args.topic)}: nothing to delete")
        return plan

    return _run(args, "delete", plan_with)


def _run(args: argparse.Namespace, action: str,
         plan_with: Callable[[KafkaReader, Group], Plan], pin: str | None = None) -> int:
    """Check, plan, print; with --execute also apply, read back and compare. `pin` is the
    absolute form of a relative target, offered so a later --execute means the same time."""
    from backend.kafka.javaadmin.reader import KafkaReader

    settings = cluster_settings(args)
    cluster = settings.describe()
    reader = KafkaReader(settings, client_id="groupscope-offsets")
    try:
        group = Group(reader, settings, args.group)
        refuse_other_types(group, action, args.execute)
        if args.execute:
            group.refuse_unless_empty()  # before the plan: a refusal is its one line
        plan = plan_with(reader, group)
        if not args.execute or not plan.changed:
            _show(plan, cluster, args.json, executing=False)
            if args.execute:
                print(f"nothing to {action}: every offset is already as planned",
                      file=sys.stderr)
            elif args.json:
                pass
            else:
                print(f"add --execute to apply it (the group must be Empty; it is now "
                      f"{group.state})")
                if pin:
                    print(f"{pin} pins this time for a later run")
            return 0
        if not args.json:
            print(format_plan(plan, cluster, executing=True), flush=True)
        refused = apply(settings, plan)
        applied = _log_applied(plan, cluster, refused)  # logged before anything else can fail
        _audit(args, applied, refused, cluster)
        try:
            read_back = group.committed()
        except UserError as exc:
            print(f"groupscope offsets: applied, but the offsets could not be read back to "
                  f"check them: {exc}", file=sys.stderr)
            return EXIT_FAILED
    finally:
        reader.close()
    return _report(plan, applied, cluster, args.json, refused, read_back)


def _show(plan: Plan, cluster: str, as_json: bool, executing: bool) -> None:
    if as_json:
        print(json.dumps({**plan_dict(plan, cluster), "executed": executing}, indent=2))
    else:
        print(format_plan(plan, cluster, executing=executing))


def _log_applied(plan: Plan, cluster: str, refused: dict[TP, str]) -> Plan:
    """Log on stderr every change the broker accepted (group, topic-partition, before →
    after), a summary, and every partition it refused; returns the plan of what it took."""
    applied = Plan(plan.group, plan.action, plan.target,
                   tuple(r for r in plan.rows if r.tp not in refused), plan.group_type)
    for line in change_lines(applied):
        print(f"groupscope offsets: {line}", file=sys.stderr)
    print(f"groupscope offsets: {plan.action} group {plan.group} on {cluster}: "
          f"{summary(applied, done=True)}", file=sys.stderr)
    for (t, p), why in sorted(refused.items()):
        print(f"groupscope offsets: {t}-{p} was NOT changed: {why}", file=sys.stderr)
    sys.stderr.flush()
    return applied


def _audit(args: argparse.Namespace, applied: Plan, refused: dict[TP, str],
           cluster: str) -> None:
    """The write in the memory's audit, as the OS user who ran the command."""
    from backend.offsets.audit import entry, keep, os_user

    why = keep(args.history or default_path(),
               entry(applied, refused, user=os_user(), via="offsets command", cluster=cluster))
    if why:
        print(f"groupscope offsets: {why}", file=sys.stderr, flush=True)


def _report(plan: Plan, applied: Plan, cluster: str, as_json: bool, refused: dict[TP, str],
            read_back: dict[TP, int]) -> int:
    """Print the offsets read back, and fail loudly on any partition that was refused or
    reads back other than planned."""
    wrong = differences(applied, read_back)  # the refused are already reported as such
    for line in wrong:
        print(f"groupscope offsets: READ BACK DIFFERS: {line}", file=sys.stderr)
    rows = [(r.topic, r.partition, read_back.get(r.tp)) for r in plan.rows]
    if as_json:
        print(json.dumps({**plan_dict(plan, cluster), "executed": True,
                          "refused": [{"topic": t, "partition": p, "error": e}
                                      for (t, p), e in sorted(refused.items())],
                          "read_back": [{"topic": t, "partition": p, "committed": c}
                                        for t, p, c in rows],
                          "matches_plan": not wrong}, indent=2))
    else:
        width = max([len("TOPIC"), *(len(t) for t, _, _ in rows)])
        lines = ["", "committed offsets read back:",
                 f"{'TOPIC':<{width}} {'P':>4} {'COMMITTED':>12}"]
        lines += [f"{t:<{width}} {p:>4} {'-' if c is None else c:>12}" for t, p, c in rows]
        lines.append("")
        if refused:
            lines.append(f"NOT APPLIED in {len(refused)} partition"
                         f"{'s' if len(refused) != 1 else ''} (see above)")
        lines.append(f"DIFFERS FROM THE PREVIEW in {len(wrong)} partition"
                     f"{'s' if len(wrong) != 1 else ''} (see above)" if wrong else
                     "every applied offset reads back as previewed")
        print("\n".join(lines))
    if refused or wrong:
        print(f"groupscope offsets: {plan.action} of group {plan.group} did not complete: "
              f"{len(refused)} refused, {len(wrong)} read back differently", file=sys.stderr)
        return EXIT_FAILED
    return 0
