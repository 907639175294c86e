"""The argument helpers every subcommand module shares."""

from __future__ import annotations

import argparse

from backend.cli_common import add_command


def _run(args: argparse.Namespace) -> int:
    return 0


def test_add_command_sets_what_runs_and_puts_the_cluster_options_first() -> None:
    parser = argparse.ArgumentParser(prog="groupscope")
    sub = parser.add_subparsers(dest="command")
    p = add_command(sub, "look", _run, cluster=True, help="short", description="long")
    p.add_argument("--json", action="store_true")
    options = [a.option_strings[0] for a in p._actions if a.option_strings]
    assert options == ["-h", "--bootstrap", "--kafka-config", "--json"]
    args = parser.parse_args(["look", "--bootstrap", "h:9092"])
    assert args.func is _run and args.bootstrap == "h:9092" and args.kafka_config is None
    assert p.description == "long" and "short" in parser.format_help()


def test_add_command_without_cluster_or_run_adds_neither() -> None:
    sub = argparse.ArgumentParser(prog="groupscope").add_subparsers(dest="command")
    p = add_command(sub, "quiet", None, help="short", description="long")
    assert [a.dest for a in p._actions] == ["help"]
    assert "func" not in vars(p.parse_args([]))
