"""The reading layer's JVM: Kafka's Java Admin in a supervised child, reached through py4j.

Why a child JVM: Kafka's own Admin client is the reference implementation of every group
API (share and streams groups included), batches committed offsets of many groups per
request, and survives a broker's connection dropping mid-request, where librdkafka's admin
API aborts the process that asked. py4j comes with pyspark.

The child is stateless, so supervising it is simple: a call that finds it dead, or that
passes its deadline (the child is then killed, since a stuck call would hold a connection),
raises `ReaderDown` ("reconnecting to the cluster") and the next call starts a fresh one.
Its standard input stays open for its whole life: the client's settings and the gateway's
token go in there (never in an argv or the environment), and its end (this process gone,
however it died) ends the JVM.

A page waits for a fresh JVM ("reconnecting to the cluster", the overview's first screen),
and most of its start is reading and verifying Kafka's client classes from their jars: it
maps them from a class-data archive when one was built for its Java and class path
(backend/kafka/javaadmin/classdata.py, `make jars`). Where that archive lives is decided here,
beside the class path it is only valid for.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from backend import classdata as base
from backend.classdata import archive_dir, java, jvm_options
from backend.kafka.clients import quiet_admin
from backend.kafka.jars import KAFKA_VERSION, client_jars
from backend.kafka.javaadmin.javaconfig import java_properties, properties_text
from backend.kafka.properties import KafkaConfigError
from backend.kafka.settings import KafkaSettings
from backend.paths import cache_dir

log = logging.getLogger("groupscope.kafka")
# py4j logs a dead JVM's broken connection with a traceback; the caller's ReaderDown
# ("reconnecting to the cluster") is the one line that says so
_py4j_log = logging.getLogger("py4j")
_py4j_log.addHandler(logging.NullHandler())
_py4j_log.propagate = False


class _WithoutPy4jRootRecords(logging.Filter):
    """py4j also logs the broken connection through the root logger itself
    (`logging.exception` in java_gateway.py), past the "py4j" logger above: drop those."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name != "root" or "py4j" not in record.pathname


logging.getLogger().addFilter(_WithoutPy4jRootRecords())

SOURCE = Path(__file__).with_name("java") / "AdminReader.java"
MAIN_CLASS = "groupscope.read.AdminReader"
START_TIMEOUT_S = 20.0
# a call's own budget inside the JVM, and how much longer this side waits before it
# declares the child stuck
CALL_TIMEOUT_S = 15.0
GRACE_S = 5.0
HEAP = "-Xmx160m"
# The JVM's own notices (an archive it cannot use and runs without, the classes it leaves out
# of one it writes) go to its log, not to its standard output, whose first line must be the
# PORT line this side waits for.
_JVM_NOTICES = ("-Xlog:all=off:stdout", "-Xlog:all=warning:stderr",
                "-XX:+DisplayVMOutputToStderr")
_JVM_FLAGS = (HEAP, "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
              "-Djava.awt.headless=true", *_JVM_NOTICES)
# the reader's compiled classes: a jar, because the JVM archives classes of jars only (it
# refuses to write an archive with a non-empty folder on its class path)
READER_JAR = "AdminReader.jar"
ARCHIVE_NAME = "kafka-reader"
# AdminGateway's default: the archive built for this Java and class path, if there is one
CACHED: Final = "cached"


class ReaderError(RuntimeError):
    """A read the cluster refused or could not answer (one line, never a secret)."""


class ReaderDown(ReaderError):
    """The reader's JVM died or stopped answering; it is being restarted."""


def py4j_jar() -> Path:
    """py4j's own jar: installed beside the package (`<prefix>/share/py4j`), else pyspark's."""
    found = sorted(Path(sys.prefix).glob("share/py4j/py4j*.jar"))
    if not found:
        import pyspark

        found = sorted((Path(pyspark.__file__).parent / "jars").glob("py4j-*.jar"))
    if not found:
        raise ReaderError("no py4j jar beside py4j or inside pyspark; reinstall pyspark")
    return found[-1]


def compiled_classes(quiet: bool = True) -> Path:
    """The jar of the reader's compiled classes, built once per source and Java (in the
    environment's share folder beside the class-data archives)."""
    return compile_jar(SOURCE, READER_JAR, "kafka-reader", [*client_jars(), py4j_jar()],
                       "groupscope's Kafka reader", quiet)


PREBUILT = "prebuilt"  # beside a Java source in an installed wheel: its jar, compiled at build
JAVA_RELEASE = "17"  # the class files' target: a jar built once runs on any Java 17 or later


def source_digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def prebuilt_jar(source: Path, jar_name: str) -> Path | None:
    """The jar the wheel was built with for `source` (setup.py puts it in `prebuilt/` beside
    the source, with the source's digest), if it is there and was built from this source:
    then a Java runtime suffices, no JDK."""
    jar = source.parent / PREBUILT / jar_name
    digest = jar.with_name(jar.name + ".sha256")
    if jar.exists() and digest.exists() and \
            digest.read_text().strip() == source_digest(source):
        return jar
    return None


def compile_jar(source: Path, jar_name: str, prefix: str, jars: Sequence[Path],
                what: str, quiet: bool = True) -> Path:
    """`source` compiled against `jars` into `<share>/<prefix>-<key>/<jar_name>`, once per
    source, Java and jars; older builds of the same prefix are deleted. An installed wheel's
    prebuilt jar is taken as it is."""
    shipped = prebuilt_jar(source, jar_name)
    if shipped is not None:
        return shipped
    javac = _javac()
    key = hashlib.sha256(source.read_bytes() + str(javac).encode()
                         + ":".join(j.name for j in jars).encode()
                         + jar_name.encode()).hexdigest()[:12]
    out = archive_dir() / f"{prefix}-{key}"
    if (out / ".complete").exists():
        return out / jar_name
    if not quiet:
        print(f"compiling {what} (once per environment)", flush=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    classes = tmp / "classes"
    classes.mkdir(parents=True)
    done = subprocess.run([str(javac), "-nowarn", "--release", JAVA_RELEASE, "-d",
                           str(classes), "-cp", os.pathsep.join(map(str, jars)), str(source)],
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        first = (done.stderr.strip().splitlines() or ["javac failed"])[0]
        raise ReaderError(f"cannot compile {what}: {first}")
    with zipfile.ZipFile(tmp / jar_name, "w", zipfile.ZIP_DEFLATED) as jar:
        for path in sorted(classes.rglob("*.class")):
            jar.write(path, path.relative_to(classes).as_posix())
    shutil.rmtree(classes)
    (tmp / ".complete").write_text(key)
    try:
        tmp.rename(out)
    except OSError:  # another process built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    _forget_older_builds(out, prefix)
    return out / jar_name


def _forget_older_builds(current: Path, prefix: str) -> None:
    """Delete the earlier builds (another source or Java) beside `current`: each change of
    a source leaves one behind otherwise. A JVM still running on one keeps its open jar;
    restarted, it compiles anew."""
    for old in current.parent.glob(f"{prefix}-*"):
        if old != current and old.is_dir() and (old / ".complete").exists():
            shutil.rmtree(old, ignore_errors=True)


def class_path() -> list[Path]:
    """The reader JVM's class path: our jar, then Kafka's client jars and py4j's."""
    return [compiled_classes(), *client_jars(), py4j_jar()]


def class_archive_path(classpath: Sequence[Path] | None = None) -> Path | None:
    """Where the reader's class-data archive for this Java and `classpath` (class_path())
    lives; None without a java or a jar. A dynamic archive is valid only for the Java build
    and the very jars (paths, sizes, times) it was recorded with, so each gets a file of its
    own rather than one the JVM would refuse: the Java build and our jar are keyed by
    backend/classdata.py (our jar's folder is named by AdminReader's source, the javac and
    the client jars' names, and a rebuilt jar has a new time), the client jars here."""
    jars = list(classpath) if classpath is not None else class_path()
    ours, clients = jars[0], jars[1:]
    digest = hashlib.sha256()
    try:
        for jar in clients:
            stat = jar.stat()
            digest.update(f"{jar.resolve()}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return base.archive_path(ARCHIVE_NAME, f"{KAFKA_VERSION}-{digest.hexdigest()[:8]}", ours)


def cached_class_archive(classpath: Sequence[Path] | None = None) -> Path | None:
    """The archive to start the reader's JVM on, if it has been built."""
    return base.cached(class_archive_path(classpath))


def _javac() -> Path:
    runtime = java()
    candidates = [runtime.parent / "javac"] if runtime else []
    which = shutil.which("javac")
    candidates += [Path(which)] if which else []
    for c in candidates:
        if c.exists():
            return c.resolve()
    raise ReaderError("groupscope reads Kafka with a small Java program and needs a JDK "
                      "(javac not found): install Java 17's JDK")


def log_path() -> Path:
    """This process's reader log, in the user's cache (a `watch` of production has no data
    directory); logs of processes gone for a day are removed."""
    folder = cache_dir() / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - 86_400
    for old in folder.glob("kafka-reader-*.log"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass
    return folder / f"kafka-reader-{os.getpid()}.log"


class AdminGateway:
    """One JVM running AdminReader for one cluster's settings, started on first use and
    again after it died. Thread-safe: py4j gives each calling thread its own connection.

    `class_archive`: the class-data archive each JVM maps; by default (CACHED) the one built
    for this Java and class path, looked up at every start (one built meanwhile is taken at
    the next), None for none. `record_classes`: the JVM writes an archive there when it is
    stopped (`stop`), and maps none (backend/kafka/javaadmin/classdata.py trains one so)."""

    def __init__(self, settings: KafkaSettings, client_id: str = "groupscope-reader",
                 call_timeout: float = CALL_TIMEOUT_S, log_file: Path | None = None,
                 class_archive: Path | Literal["cached"] | None = CACHED,
                 record_classes: Path | None = None) -> None:
        self.settings = settings
        self.client_id = client_id
        self.call_timeout = call_timeout
        self.log_file = log_file or log_path()
        self.class_archive = class_archive
        self.record_classes = record_classes
        # the archive the running (or last) JVM was started on, None for none: whether the
        # JVM took it, base.maps says
        self.archive: Path | None = None
        self.starts = 0  # JVMs started (a restart counts), for stats and tests
        self.calls = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._gateway: Any = None
        self._closed = False
        # settings the clients refuse are refused now, in one line: worded as the CLI tools
        # word them (librdkafka's check of the same file), then mapped for the Java client
        quiet_admin(settings)
        self._props = properties_text(java_properties(settings, client_id))

    # ---- life ----------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The JVM's process, while this gateway has one."""
        return self._proc

    def _ensure(self) -> Any:
        with self._lock:
            if self._closed:
                raise ReaderError("the Kafka reader is closed")
            if self._gateway is not None and self._proc is not None and self._proc.poll() is None:
                return self._gateway
            self._stop_locked()
            self._start_locked()
            return self._gateway

    def _start_locked(self) -> None:
        from py4j.java_gateway import GatewayParameters, JavaGateway

        jars = class_path()
        classpath = os.pathsep.join(map(str, jars))
        runtime = java()
        if runtime is None:
            raise ReaderError("java not found: groupscope reads Kafka with Java 17")
        token = secrets.token_urlsafe(24)
        # a missing archive: none; a stale one the JVM ignores (a line in the log), so no
        # check here delays the start
        archive = (cached_class_archive(jars) if self.class_archive == CACHED
                   else self.class_archive)
        archive = None if self.record_classes is not None else archive
        argv = [str(runtime), *_JVM_FLAGS, *jvm_options(archive, self.record_classes), "-cp",
                classpath, MAIN_CLASS]
        self.archive = archive
        with open(self.log_file, "ab") as log_out:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log_out, start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(f"{self._props}--end--\n{token}\n".encode())
            proc.stdin.flush()
        except BrokenPipeError:
            pass
        port = _read_port(proc, START_TIMEOUT_S)
        if isinstance(port, str):
            _kill(proc)
            raise ReaderError(self.settings.scrub(f"the Kafka client refused the settings for "
                                                  f"{self.settings.bootstrap}: {port}"))
        if port is None:
            _kill(proc)
            raise ReaderDown(f"the Kafka reader did not start (see {self.log_file})")
        self._proc = proc
        self._gateway = JavaGateway(gateway_parameters=GatewayParameters(
            address="127.0.0.1", port=port, auth_token=token, auto_convert=False,
            auto_field=False, read_timeout=self.call_timeout + GRACE_S))
        self.starts += 1

    def _stop_locked(self) -> None:
        gateway, proc = self._gateway, self._proc
        self._gateway = self._proc = None
        if gateway is not None:
            with contextlib.suppress(Exception):
                gateway.close(keep_callback_server=False, close_callback_server_connections=False)
        if proc is not None:
            _kill(proc)

    def restart(self) -> None:
        """Kill the JVM now; the next call starts another."""
        with self._lock:
            self._stop_locked()

    def stop(self, timeout: float = 30.0) -> int | None:
        """End the JVM as this process's exit would, by closing its standard input, and wait
        for it (killed after `timeout`); its exit code, None without a JVM. Unlike a kill it
        lets the JVM run its exit: one started with `record_classes` writes its archive
        then. The next call starts another."""
        with self._lock:
            gateway, proc = self._gateway, self._proc
            self._gateway = self._proc = None
            if gateway is not None:
                with contextlib.suppress(Exception):
                    gateway.close(keep_callback_server=False,
                                  close_callback_server_connections=False)
            if proc is None:
                return None
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=timeout)
            _kill(proc)
            return proc.returncode

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._stop_locked()

    # ---- calls ---------------------------------------------------------------------------

    def call(self, method: str, *args: str | int) -> dict[str, Any]:
        """One AdminReader method's answer, parsed. A whole-call failure raises ReaderError
        with the client's one line; a dead or stuck JVM raises ReaderDown after killing it."""
        from py4j.protocol import Py4JError, Py4JNetworkError

        gateway = self._ensure()
        timeout_ms = int(self.call_timeout * 1000)
        self.calls += 1
        try:
            text = getattr(gateway.entry_point, method)(*args, timeout_ms)
        except (Py4JNetworkError, Py4JError, OSError) as exc:
            with self._lock:
                if self._gateway is gateway:
                    self._stop_locked()
            why = "stopped answering" if "timed out" in str(exc).lower() else "went away"
            raise ReaderDown(f"reconnecting to the cluster (the Kafka reader {why})") from None
        answer = orjson.loads(text)
        if isinstance(answer, dict) and set(answer) == {"error"}:
            raise ReaderError(self.settings.scrub(answer["error"]))
        return answer


def _read_port(proc: subprocess.Popen[bytes], timeout: float) -> int | str | None:
    """The port the child prints once its gateway listens, the client's one-line refusal of
    the settings, or None when it dies or is late."""
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while time.monotonic() < deadline:
            if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                break
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return None
            buf += chunk
            if b"\n" in buf:
                line = buf.split(b"\n", 1)[0].decode(errors="replace")
                if line.startswith("ERROR "):
                    return line.removeprefix("ERROR ")
                return int(line.split()[1]) if line.startswith("PORT ") else None
    finally:
        sel.close()
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass


__all__ = ["AdminGateway", "KafkaConfigError", "ReaderDown", "ReaderError"]
