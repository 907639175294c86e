"""The room's Spark Connect engine, reached from a participant's laptop (a network namespace):
without the room's token it refuses, with it it answers a real query."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.system.room.netns import Laptop

TOKEN = "room-spark-token-4711"
PROBE = ("import sys; from backend.spark.session import check_engine, EngineUnavailable\n"
         "try:\n"
         "    version = check_engine(sys.argv[1], timeout=20.0, token=sys.argv[2] or None)\n"
         "    print('version', version)\n"
         "    import os; os.environ['GROUPSCOPE_SPARK_TOKEN'] = sys.argv[2]\n"
         "    from backend.replica.spark_summary import SparkSummariser\n"
         "    SparkSummariser(sys.argv[1]).warm_up(typed=True)  # a replica's real query\n"
         "    print('summarised')\n"
         "except EngineUnavailable as exc:\n"
         "    print('refused', exc); sys.exit(3)\n")
REPO = Path(__file__).resolve().parents[3]


def test_the_engine_on_the_room_address_needs_the_token(spark_factory, laptop: Laptop,
                                                        tmp_path: Path) -> None:
    server = spark_factory(tmp_path / "spark", host="0.0.0.0", token=TOKEN)
    server.start(warm_up=False)
    remote = f"sc://{laptop.host_address}:{server.port}"

    def probe(token: str) -> tuple[int, str]:
        done = laptop.run([sys.executable, "-c", PROBE, remote, token], timeout=90,
                          capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
        return done.returncode, done.stdout + done.stderr

    code, out = probe("")
    assert code == 3 and "refused this client's token (UNAUTHENTICATED)" in out, out
    code, out = probe("not-the-token")
    assert code == 3 and "UNAUTHENTICATED" in out, out
    assert "not-the-token" not in out and TOKEN not in out
    code, out = probe(TOKEN)
    assert code == 0 and out.startswith("version 4.") and "summarised" in out, out
    # and the token never travels on the server's command line, where `ps` would show it
    assert TOKEN not in " ".join(server.process.args)
