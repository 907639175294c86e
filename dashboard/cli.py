"""`groupscope watch`: serve the dashboard read-only for any cluster and group.

Registered like every package's cli.py (`register(sub)`); also runnable on its own as
`python -m dashboard.cli watch …`. It checks the properties file up front (a bad line is a
one-line error, not a page error), then runs Streamlit with every control hidden.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def register(sub: argparse._SubParsersAction) -> None:
    from backend.cli import add_cluster_args

    p = sub.add_parser("watch", help="watch any consumer group read-only in the browser",
                       description="Serve the dashboard for an existing cluster, opening the "
                                   "Watch page with every control hidden. Nothing is joined, "
                                   "committed or changed on the cluster.")
    add_cluster_args(p)
    p.add_argument("--group", help="consumer group to open (default: pick on the page)")
    p.add_argument("--port", type=int, default=None,
                   help="HTTP port (default 8501, env GROUPSCOPE_WEB_PORT)")
    p.set_defaults(func=watch)


def watch_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment the read-only dashboard runs with; raises KafkaConfigError early."""
    from backend.cluster.settings import resolve_settings

    config = str(Path(args.kafka_config).expanduser().resolve()) if args.kafka_config else None
    settings = resolve_settings(args.bootstrap, config)  # validates the file, names bad lines
    env = {"GROUPSCOPE_READONLY": "1", "GROUPSCOPE_BOOTSTRAP": settings.bootstrap}
    if config:
        env["GROUPSCOPE_KAFKA_CONFIG"] = config
    if args.group:
        env["GROUPSCOPE_GROUP"] = args.group
    return env


def watch(args: argparse.Namespace) -> int:
    from backend.cluster.settings import resolve_settings

    env = watch_env(args)
    port = args.port or int(os.environ.get("GROUPSCOPE_WEB_PORT", "8501"))
    described = resolve_settings(env["GROUPSCOPE_BOOTSTRAP"],
                                 env.get("GROUPSCOPE_KAFKA_CONFIG")).describe()
    print(f"watching {described} read-only at http://localhost:{port}", flush=True)
    os.environ.update(env)
    cmd = [sys.executable, "-m", "streamlit", "run", str(REPO_ROOT / "dashboard" / "app.py"),
           f"--server.port={port}", "--server.headless=true",
           "--browser.gatherUsageStats=false", "--server.fileWatcherType=none"]
    os.chdir(REPO_ROOT)  # .streamlit/config.toml lives here
    os.execv(sys.executable, cmd)
    return 0  # not reached


def main(argv: list[str] | None = None) -> int:
    from backend.cli import UserError
    from backend.cluster.properties import KafkaConfigError

    parser = argparse.ArgumentParser(prog="groupscope")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UserError, KafkaConfigError) as exc:
        print(f"groupscope watch: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
