"""One way to get Spark: a Spark Connect session for SPARK_REMOTE (default: embedded server).

The same code runs against a real cluster's Connect endpoint; nothing here starts a JVM.
"""

from __future__ import annotations

import contextlib
import os
import warnings

from backend.engine.server import DEFAULT_PORT

ENV_REMOTE = "SPARK_REMOTE"

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)


class EngineUnavailable(RuntimeError):
    """Spark Connect did not answer."""


def spark_remote(remote: str | None = None) -> str:
    """Explicit > SPARK_REMOTE > the embedded server on GROUPSCOPE_SPARK_PORT."""
    port = os.environ.get("GROUPSCOPE_SPARK_PORT", str(DEFAULT_PORT))
    return remote or os.environ.get(ENV_REMOTE) or f"sc://127.0.0.1:{port}"


def connect(remote: str | None = None):
    """A fresh Spark Connect session (its own server-side session id)."""
    from pyspark.sql import SparkSession

    url = spark_remote(remote)
    try:
        return SparkSession.builder.remote(url).create()
    except Exception as exc:
        raise EngineUnavailable(f"cannot open a Spark Connect session at {url}: {exc}") from exc


def check_engine(remote: str | None = None, warm_up: bool = False, timeout: float = 10.0) -> str:
    """Run a real query; return the engine's Spark version or raise EngineUnavailable.

    The gRPC channel retries for a long time by default; a TCP probe first bounds the wait
    when nothing listens.
    """
    from urllib.parse import urlparse

    from backend.netutil import port_open

    url = spark_remote(remote)
    parsed = urlparse(url.replace("sc://", "http://", 1))
    host, port = parsed.hostname or "127.0.0.1", parsed.port or DEFAULT_PORT
    if not port_open(host, port, timeout=min(timeout, 2.0)):
        raise EngineUnavailable(f"nothing is listening at {url}")
    session = connect(url)
    try:
        total = session.range(100).selectExpr("sum(id) AS s").collect()[0]["s"]
        if total != 4950:
            raise EngineUnavailable(f"Spark at {url} answered a wrong sum: {total}")
        if warm_up:
            session.range(10_000).selectExpr("id % 12 AS k", "id AS v").groupBy("k").agg(
                {"v": "avg"}
            ).collect()
        return session.version
    except EngineUnavailable:
        raise
    except Exception as exc:
        raise EngineUnavailable(f"Spark at {url} failed a test query: {exc}") from exc
    finally:
        with contextlib.suppress(Exception):
            session.stop()
