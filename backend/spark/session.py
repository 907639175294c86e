"""One way to get Spark: a Spark Connect session for SPARK_REMOTE (default: embedded server).

The same code runs against a real cluster's Connect endpoint; nothing here starts a JVM, and
nothing here imports the server side (backend/engine), which imports this module instead.
"""

from __future__ import annotations

import contextlib
import os
import warnings

from backend.cli_common import UserError
from backend.contracts.room import ENV_ROOM_ADDRESS, SPARK_TOKEN_FILE, read_secret
from backend.errors import one_line
from backend.netutil import port_open
from backend.paths import data_dir

ENV_REMOTE = "SPARK_REMOTE"
# Spark Connect's own default port: where a client looks for the embedded engine unless told
# otherwise, and where backend/engine/server.py listens by default
DEFAULT_PORT = 15002
# The room's Spark Connect token. Not SPARK_CONNECT_AUTHENTICATE_TOKEN: pyspark reads that one
# itself and then insists on TLS for any host but "localhost", which the embedded server lacks.
ENV_TOKEN = "GROUPSCOPE_SPARK_TOKEN"

warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)


class EngineUnavailable(RuntimeError):
    """Spark Connect did not answer."""


def spark_remote(remote: str | None = None) -> str:
    """Explicit > SPARK_REMOTE > the embedded server on GROUPSCOPE_SPARK_PORT."""
    port = os.environ.get("GROUPSCOPE_SPARK_PORT", str(DEFAULT_PORT))
    return remote or os.environ.get(ENV_REMOTE) or f"sc://127.0.0.1:{port}"


def answering_engine(remote: str | None = None) -> str:
    """The engine a command runs replicas against (`spark_remote`), checked answering;
    UserError in one line naming how to start one otherwise (`chaos`, `lab`)."""
    url = spark_remote(remote)
    try:
        check_engine(url)
    except EngineUnavailable as exc:
        raise UserError(f"{exc} (start it with `groupscope up` or `groupscope spark`)") from None
    return url


def spark_token(token: str | None = None) -> str | None:
    """Explicit > GROUPSCOPE_SPARK_TOKEN > the room's token file when this process belongs to
    a room's stack (`up --room` sets the room address for all of them) > none."""
    found = token or os.environ.get(ENV_TOKEN)
    if found or not os.environ.get(ENV_ROOM_ADDRESS):
        return found or None

    return read_secret(data_dir(), SPARK_TOKEN_FILE)


def connect(remote: str | None = None, token: str | None = None, retries: int = 3,
            max_backoff_ms: int = 2000):
    """A fresh Spark Connect session (its own server-side session id) that retries an
    unavailable engine at most `retries` times, from 200 ms and at most `max_backoff_ms`
    apart: a probe, a poller or a replica must learn that the engine went away, not hang on
    it. The client's default is ten minutes, and it applies at interpreter exit too, where a
    client left open asks the engine to clean up: with the engine gone, the process would
    hang there. The session's release in `stop()` is bounded the same way."""
    from pyspark.sql import SparkSession

    url = spark_remote(remote)
    token = spark_token(token)
    try:
        if token:
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            # what SparkSession.builder.remote() sets: pyspark.sql.functions and friends then
            # build Connect expressions instead of looking for a local SparkContext
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
            session = ConnectSession.builder.channelBuilder(_bearer_channel(url, token)).create()
        else:
            session = SparkSession.builder.remote(url).create()
    except Exception as exc:
        raise EngineUnavailable(f"cannot open a Spark Connect session at {url}: "
                                f"{_without(token, exc)}") from None
    with contextlib.suppress(Exception):  # an older client without retry policies
        from pyspark.sql.connect.client.retries import DefaultPolicy

        session.client.set_retry_policies(
            [DefaultPolicy(max_retries=retries, initial_backoff=200,
                           max_backoff=max_backoff_ms)])
    return session


def _bearer_channel(url: str, token: str):
    """A plaintext gRPC channel that sends `authorization: Bearer <token>` with every call:
    what the server's pre-shared-key check reads. pyspark's own `token=` would switch to TLS,
    which a Spark Connect server does not speak by itself."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    class BearerChannelBuilder(DefaultChannelBuilder):
        @property
        def token(self) -> str | None:  # keeps pyspark from choosing TLS
            return None

    builder = BearerChannelBuilder(url)
    builder.set("authorization", f"Bearer {token}")  # a non-reserved param is sent as metadata
    return builder


def _grpc_status(exc: BaseException) -> str:
    """The gRPC status name behind an error, looking through pyspark's wrapping."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        code = getattr(seen, "code", None)
        if callable(code):
            return str(getattr(code(), "name", ""))
        seen = seen.__cause__ or seen.__context__
    return ""


def _without(secret: str | None, exc: BaseException) -> str:
    """An error as one line, the token blanked out should a library ever echo it; a refused
    token says what to do about it."""
    name = _grpc_status(exc)
    if name in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return ("the engine refused this client's token (" + name + "): pass the room's Spark "
                "token with --spark-token or GROUPSCOPE_SPARK_TOKEN")
    text = one_line(exc, limit=None)  # uncut: a cut could leave half a token to slip by
    return text.replace(secret, "***") if secret else text


def check_engine(remote: str | None = None, warm_up: bool = False, timeout: float = 10.0,
                 token: str | None = None) -> str:
    """Run a real query; return the engine's Spark version or raise EngineUnavailable.

    The gRPC channel retries for ten minutes by default; a TCP probe first bounds the wait
    when nothing listens, and retries about `timeout` seconds long when an engine that
    listened goes away (or is not ready yet).
    """
    from urllib.parse import urlparse

    url = spark_remote(remote)
    parsed = urlparse(url.replace("sc://", "http://", 1))
    host, port = parsed.hostname or "127.0.0.1", parsed.port or DEFAULT_PORT
    if not port_open(host, port, timeout=min(timeout, 2.0)):
        raise EngineUnavailable(f"nothing is listening at {url}")
    session = connect(url, token, retries=max(2, round(timeout)), max_backoff_ms=1000)
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
        raise EngineUnavailable(f"Spark at {url} failed a test query: "
                                f"{_without(spark_token(token), exc)}") from None
    finally:
        with contextlib.suppress(Exception):
            session.stop()
