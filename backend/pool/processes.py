"""Replica child processes: spawn, kill (SIGKILL), stop (SIGTERM), restart, scale, reap.

Why it is built this way:
- Each replica runs in its own session / process group, so a kill takes the replica's own
  children with it and a Ctrl-C in the supervisor's terminal is not delivered to them twice.
- Every child is spawned through backend.proc's exec shim, so it dies with the supervisor
  however the supervisor dies, and by one long-lived "spawner" thread: the death signal
  follows the thread that forked (backend/proc.py has the rules), so spawning from
  short-lived HTTP request threads would kill replicas at random.
- One waiter thread per child waits with WNOWAIT first, so the exit is observed while the
  pid is still a zombie (it cannot be reused yet); then, under the pool lock, leftovers of
  its process group are killed and the zombie is reaped. Signals are only ever sent under
  the same lock to a child not yet reaped, so a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from queue import Queue
from typing import Any

from pydantic import ValidationError

from backend.contracts import AFTER_SUMMARY, SHARE
from backend.contracts.control import (
    MAX_REPLICAS,
    STANDBY_DELAY_S,
    STANDBY_NAME,
    GroupChoiceError,
    ReplicaInfo,
    ReplicaOptions,
    StandbyOrder,
    resolve_assignor,
    resolve_commit,
)
from backend.errors import one_line
from backend.pool.names import colour_for, next_free_name
from backend.proc import spawn

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STOP_GRACE = 30.0

def default_replica_command() -> tuple[str, ...]:
    """`groupscope replica` run with this interpreter, whether or not the script is installed."""
    return (sys.executable, "-m", "backend.cli", "replica")


def replica_argv(name: str, group: str, topic: str, bootstrap: str, *,
                 protocol: str | None = None, assignor: str | None = None,
                 exactly_once: bool = False, commit: str | None = None,
                 static: bool = False, max_rate: float | None = None,
                 kafka_config: str | None = None,
                 spark_remote: str | None = None,
                 command: Sequence[str] | None = None, extra: Sequence[str] = ()) -> list[str]:
    """A replica's command line, the one builder of it: the supervisor, the test harness and
    the benchmarks all start replicas through this, so a flag is added or renamed once.
    None leaves an option out, and the replica uses its own default."""
    args = [*(command or default_replica_command()), "--id", name, "--group", group,
            "--topic", topic]
    if protocol is not None:
        args += ["--protocol", protocol]
    if assignor is not None:
        args += ["--assignor", assignor]
    args += ["--bootstrap", bootstrap]
    if exactly_once:
        args.append("--exactly-once")
    if commit is not None:
        args += ["--commit", commit]
    if static:
        args.append("--static")
    if max_rate is not None:
        args += ["--max-rate", repr(float(max_rate))]
    if kafka_config:
        args += ["--kafka-config", str(Path(kafka_config).resolve())]
    if spark_remote:
        args += ["--spark-remote", spark_remote]
    return [*args, *extra]


class PoolError(Exception):
    """A request the pool refuses; `status` is the HTTP status the API answers with."""

    status = 409


class UnknownReplica(PoolError):
    status = 404


class InvalidRequest(PoolError):
    status = 422


class UnknownBroker(PoolError):
    status = 404


@dataclass(frozen=True)
class LaunchConfig:
    """Everything a replica needs besides its name and options."""

    group: str
    topic: str
    bootstrap: str
    kafka_config: str | None = None
    spark_remote: str | None = None
    command: tuple[str, ...] = field(default_factory=default_replica_command)
    extra_args: tuple[str, ...] = ()
    log_dir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    stop_grace: float = DEFAULT_STOP_GRACE
    # keep a warm standby (`groupscope replica --standby`) for the next start; only with the
    # replica command itself, which speaks the standby's order (a stand-in need not)
    standby: bool = False
    standby_delay: float = STANDBY_DELAY_S
    # members of a share group (`groupscope replica --share`): no protocol, assignor, commit
    # mode or cap applies to them; their names are the consumer group's (another pool)
    share: bool = False

    def argv(self, name: str, options: ReplicaOptions) -> list[str]:
        if self.share:
            return replica_argv(name, self.group, self.topic, self.bootstrap,
                                kafka_config=self.kafka_config, spark_remote=self.spark_remote,
                                command=self.command, extra=("--share", *self.extra_args))
        return replica_argv(name, self.group, self.topic, self.bootstrap,
                            protocol=options.protocol, assignor=options.assignor,
                            commit=None if options.commit == AFTER_SUMMARY else options.commit,
                            static=options.static,
                            max_rate=options.max_rate, kafka_config=self.kafka_config,
                            spark_remote=self.spark_remote, command=self.command,
                            extra=self.extra_args)


def validate_options(protocol: str, assignor: str | None, exactly_once: bool = False, *,
                     static: bool = False, max_rate: float | None = None,
                     commit: str | None = None) -> ReplicaOptions:
    """The options a replica joins with, or InvalidRequest naming what to choose instead.
    `exactly_once` is the older spelling of `commit="transactional"`."""
    try:
        mode = resolve_commit(commit, True if exactly_once else None) or AFTER_SUMMARY
        return ReplicaOptions(protocol=protocol, assignor=resolve_assignor(protocol, assignor),
                              commit=mode, static=static, max_rate=max_rate)
    except (GroupChoiceError, ValidationError) as exc:
        raise InvalidRequest(one_line(exc)) from None


@dataclass(eq=False)
class ReplicaProcess:
    """The supervisor's record of one replica process (mutable; guarded by the pool lock)."""

    name: str
    options: ReplicaOptions
    popen: Any
    started_at: float
    log_file: Path | None
    restarts: int = 0
    crashes: int = 0
    state: str = "running"
    intent: str | None = None  # kill | stop | restart | shutdown: why it is going away
    ended_at: float | None = None
    returncode: int | None = None
    forced: bool = False
    reaped: bool = False
    timer: threading.Timer | None = None
    waiter: threading.Thread | None = None
    share: bool = False  # a share group's member: none of `options` applies

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return not self.reaped

    def info(self) -> ReplicaInfo:
        sig = None
        if self.returncode is not None and self.returncode < 0:
            try:
                sig = signal.Signals(-self.returncode).name
            except ValueError:
                sig = f"signal {-self.returncode}"
        return ReplicaInfo(
            name=self.name, colour=colour_for(self.name), state=self.state, pid=self.pid,
            started_at=self.started_at, ended_at=self.ended_at, returncode=self.returncode,
            exit_signal=sig, protocol=SHARE if self.share else self.options.protocol,
            assignor="" if self.share else self.options.assignor,
            commit=self.options.commit, static=self.options.static,
            max_rate=self.options.max_rate, restarts=self.restarts,
            crashes=self.crashes, forced=self.forced,
            log_file=str(self.log_file) if self.log_file else None,
        )


class _Spawner:
    """One long-lived thread that forks every child (see the module docstring)."""

    def __init__(self) -> None:
        self._queue: Queue[tuple[Callable[[], Any], Future] | None] = Queue()
        self._thread = threading.Thread(target=self._run, name="replica-spawner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, fut = item
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as exc:
                    fut.set_exception(exc)

    def call(self, fn: Callable[[], Any]) -> Any:
        if threading.current_thread() is self._thread:
            return fn()
        fut: Future = Future()
        self._queue.put((fn, fut))
        return fut.result()

    def close(self) -> None:
        self._queue.put(None)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)


def _banner(log_file: Path, text: str) -> None:
    """A `---- time text` line in a replica's log, where each start of that name begins."""
    with open(log_file, "ab") as out:
        out.write(f"---- {time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n".encode())


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ReplicaPool:
    """Owns the replica processes of one group. Every public method is thread-safe."""

    def __init__(self, config: LaunchConfig, options: ReplicaOptions | None = None,
                 max_replicas: int = MAX_REPLICAS,
                 on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.config = config
        self._options = options or ReplicaOptions()
        self.max_replicas = max_replicas
        self._on_event = on_event
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._records: dict[str, ReplicaProcess] = {}
        self._recent: deque[dict[str, Any]] = deque(maxlen=50)
        # what the starts and stops being made are for: "scale" while scale() makes them,
        # "restart" while a restarting replica starts again
        self._via: str | None = None
        self._closing = False
        self._spawner = _Spawner()
        self._standby: Any = None  # the warm standby's Popen, its stdin a pipe, or None
        self._standby_held = False  # hold_standby
        self._standby_timer: threading.Timer | None = None
        if config.log_dir:
            Path(config.log_dir).mkdir(parents=True, exist_ok=True)

    # ---- queries ---------------------------------------------------------------------------

    @property
    def options(self) -> ReplicaOptions:
        with self._lock:
            return self._options

    def replicas(self) -> list[ReplicaInfo]:
        """Live replicas first (oldest first), then the ones that ended (newest first)."""
        with self._lock:
            recs = list(self._records.values())
        live = sorted((r for r in recs if r.alive), key=lambda r: r.started_at)
        dead = sorted((r for r in recs if not r.alive), key=lambda r: -(r.ended_at or 0))
        return [r.info() for r in (*live, *dead)]

    def get(self, name: str) -> ReplicaInfo:
        with self._lock:
            return self._record(name).info()

    def live_names(self) -> list[str]:
        return [r.name for r in self.replicas() if r.alive]

    def active_count(self) -> int:
        """Replicas that are running or coming back (restarting), not those going away."""
        with self._lock:
            return len(self._active())

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._recent)

    # ---- actions ---------------------------------------------------------------------------

    def set_options(self, protocol: str | None = None, assignor: str | None = None,
                    exactly_once: bool | None = None, static: bool | None = None,
                    commit: str | None = None) -> ReplicaOptions:
        """Options for replicas started from now on; running ones keep theirs. `exactly_once`
        is the older spelling of a commit mode (True: transactional, False: after-summary)."""
        with self._lock:
            old = self._options
            switching = protocol is not None and protocol != old.protocol
            try:
                mode = resolve_commit(commit, exactly_once) or old.commit
            except GroupChoiceError as exc:
                raise InvalidRequest(one_line(exc)) from None
            # a protocol switch without an assignor takes that protocol's default
            self._options = validate_options(
                protocol if protocol is not None else old.protocol,
                assignor if assignor is not None or switching else old.assignor,
                static=old.static if static is None else static, max_rate=old.max_rate,
                commit=mode)
            return self._options

    def set_capacity(self, max_rate: float | None) -> tuple[ReplicaOptions, list[str]]:
        """Every replica's rate cap (None: none), for new replicas and running ones alike.

        Capacity is a property of the fleet, not of one replica, and a replica reads it only
        from its command line: so each running replica with another cap is restarted (the
        graceful restart: finish the batch, commit, start again with the new cap). They all
        restart at once, which is one rebalance rather than one per replica. Returns the new
        options and the replicas restarting.
        """
        with self._lock:
            self._check_open()
            old = self._options
            self._options = validate_options(old.protocol, old.assignor, static=old.static,
                                             max_rate=max_rate, commit=old.commit)
            restarting = []
            for rec in self._live():  # one stopping now takes the new cap if restarted later
                if rec.options.max_rate == max_rate:
                    continue
                rec.options = rec.options.model_copy(update={"max_rate": max_rate})
                if rec.intent is None:
                    self._terminate(rec, "restart")
                if rec.intent == "restart":  # one restarting already comes back with it too
                    restarting.append(rec.name)
            return self._options, sorted(restarting)

    def start(self) -> ReplicaInfo:
        """Start one more replica under the first free name."""
        with self._lock:
            self._check_open()
            if len(self._live()) >= self.max_replicas:
                raise PoolError(f"already {self.max_replicas} replicas, the most this "
                                f"supervisor runs")
            taken = {r.name for r in self._live()}
            return self._spawn(next_free_name(taken)).info()

    def kill(self, name: str) -> ReplicaInfo:
        """SIGKILL the replica and its process group: a crash, seen after the session timeout."""
        with self._lock:
            rec = self._record(name)
            if not rec.alive:
                raise PoolError(f"replica {name} is not running ({rec.state})")
            rec.intent = "kill"
            _killpg(rec.pid, signal.SIGKILL)
            self._note(rec, "kill")
            return rec.info()

    def stop(self, name: str) -> ReplicaInfo:
        """SIGTERM: the replica finishes its batch, commits, leaves the group and exits."""
        with self._lock:
            rec = self._record(name)
            if not rec.alive:
                raise PoolError(f"replica {name} is not running ({rec.state})")
            if rec.intent == "kill":
                raise PoolError(f"replica {name} is already being killed")
            if rec.intent != "stop":
                self._terminate(rec, "stop")
            return rec.info()

    def restart(self, name: str) -> ReplicaInfo:
        """Graceful stop, then the same name starts again with its own options (new options
        are for new replicas) and the fleet's current capacity; a stopped, killed or crashed
        one just starts."""
        with self._lock:
            self._check_open()
            rec = self._record(name)
            if not rec.alive:
                live = {r.name for r in self._live()}
                if name in live:  # cannot happen: one record per name
                    raise PoolError(f"replica {name} is already running")
                options = rec.options.model_copy(update={"max_rate": self._options.max_rate})
                return self._spawn(name, restarts=rec.restarts + 1, crashes=rec.crashes,
                                   options=options).info()
            if rec.intent in ("kill", "shutdown"):
                raise PoolError(f"replica {name} is going away ({rec.intent}); restart it "
                                f"once it has ended")
            if rec.intent != "restart":
                self._terminate(rec, "restart")
            return rec.info()

    def scale(self, n: int) -> dict[str, list[str]]:
        """Start new replicas, or gracefully stop the newest, until `n` are active."""
        if isinstance(n, bool) or not isinstance(n, int):
            raise InvalidRequest("replicas must be a whole number")
        if n < 0 or n > self.max_replicas:
            raise InvalidRequest(f"replicas must be between 0 and {self.max_replicas}, not {n}")
        started: list[str] = []
        stopping: list[str] = []
        with self._lock:
            self._check_open()
            self._via = "scale"  # what the starts and stops below say they were for
            try:
                active = self._active()
                if len(active) > n:
                    newest = sorted(active, key=lambda r: r.started_at, reverse=True)
                    for rec in newest[:len(active) - n]:
                        self._terminate(rec, "stop")
                        stopping.append(rec.name)
                while len(self._active()) < n:
                    if len(self._live()) >= self.max_replicas:
                        break  # some are still stopping; they count against the limit
                    started.append(self.start().name)
            finally:
                self._via = None
        return {"started": started, "stopping": stopping}

    def wait_for(self, predicate: Callable[[list[ReplicaInfo]], bool], timeout: float) -> bool:
        """Block until predicate(replicas()) holds (re-checked on every exit) or timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.replicas()):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.5))
            return True

    def shutdown(self, grace: float | None = None) -> None:
        """Stop every replica (SIGTERM, SIGKILL after `grace`), reap all, end the spawner."""
        grace = self.config.stop_grace if grace is None else grace
        with self._lock:
            self._closing = True
            self._end_standby()
            for rec in self._live():
                if rec.intent not in ("kill", "stop", "shutdown"):
                    self._terminate(rec, "shutdown", escalate=False)
        if not self.wait_for(lambda rs: not any(r.alive for r in rs), grace):
            with self._lock:
                for rec in self._live():
                    rec.forced = True
                    _killpg(rec.pid, signal.SIGKILL)
            self.wait_for(lambda rs: not any(r.alive for r in rs), 10.0)
        with self._lock:
            waiters = [r.waiter for r in self._records.values() if r.waiter]
            timers = [r.timer for r in self._records.values() if r.timer]
        for t in timers:
            t.cancel()
        for w in waiters:
            if w is not threading.current_thread():
                w.join(timeout=5)
        self._spawner.close()

    # ---- internals (call with the lock held) ---------------------------------------------

    def _check_open(self) -> None:
        if self._closing:
            raise PoolError("the supervisor is shutting down")

    def _record(self, name: str) -> ReplicaProcess:
        rec = self._records.get(name)
        if rec is None:
            raise UnknownReplica(f"no replica named {name!r}")
        return rec

    def _live(self) -> list[ReplicaProcess]:
        return [r for r in self._records.values() if r.alive]

    def _active(self) -> list[ReplicaProcess]:
        return [r for r in self._live() if r.intent in (None, "restart")]

    def _terminate(self, rec: ReplicaProcess, intent: str, escalate: bool = True) -> None:
        rec.intent = intent
        rec.state = "restarting" if intent == "restart" else "stopping"
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGTERM)
        if escalate and rec.timer is None:  # a second stop/restart keeps the first deadline
            rec.timer = threading.Timer(self.config.stop_grace, self._escalate, args=(rec,))
            rec.timer.daemon = True
            rec.timer.start()
        self._note(rec, intent)

    def _escalate(self, rec: ReplicaProcess) -> None:
        with self._lock:
            if rec.alive:
                rec.forced = True
                _killpg(rec.pid, signal.SIGKILL)
                self._note(rec, "forced")

    def _spawn(self, name: str, restarts: int = 0, crashes: int = 0,
               options: ReplicaOptions | None = None) -> ReplicaProcess:
        options = options or self._options
        argv = self.config.argv(name, options)
        log_file = Path(self.config.log_dir) / f"{name}.log" if self.config.log_dir else None
        banner = f"start {name}: {' '.join(argv)}"
        try:
            popen = (self._take_standby(name, argv, log_file)
                     or self._spawner.call(lambda: self._launch(argv, log_file, banner)))
        except OSError as exc:
            raise PoolError(f"could not start replica {name}: {exc}") from None
        self._arm_standby()
        rec = ReplicaProcess(name=name, options=options, popen=popen, started_at=time.time(),
                             log_file=log_file, restarts=restarts, crashes=crashes,
                             share=self.config.share)
        self._records[name] = rec
        rec.waiter = threading.Thread(target=self._wait, args=(rec,), daemon=True,
                                      name=f"reaper-{name}")
        rec.waiter.start()
        self._note(rec, "start")
        self._changed.notify_all()
        return rec

    def _launch(self, argv: list[str], log_file: Path | None, banner: str | None = None,
                stdin: Any = subprocess.DEVNULL) -> Any:
        """Fork `argv` in its own session, its output appended to `log_file` (after a
        `banner` line); run on the spawner thread (`_Spawner`)."""
        out: Any = subprocess.DEVNULL
        if log_file is not None:
            if banner:
                _banner(log_file, banner)
            out = open(log_file, "ab")  # noqa: SIM115 - closed right after the fork
        try:
            return spawn(argv, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
                         env=self._env(), close_fds=True, start_new_session=True)
        finally:
            if log_file is not None:
                out.close()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.config.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                            if p)
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    # ---- the warm standby (call with the lock held) -----------------------------------------

    def _take_standby(self, name: str, argv: list[str], log_file: Path | None) -> Any:
        """The standby's process, now replica `name` (its order sent), or None: no standby,
        or it died waiting (Spark or Kafka went away), and `name` starts cold instead.

        What it saves is the part of a start that needs no name: the interpreter, imports,
        a Spark session and the batch query compiled, which on 2 busy cores was most of a
        new replica's wait for its first batch (bench/README.md, "A warm standby replica")."""
        standby, self._standby = self._standby, None
        if standby is None or standby.poll() is not None:
            return None
        order = StandbyOrder(argv=argv[len(self.config.command):],
                             log=str(log_file) if log_file else None, title=" ".join(argv))
        if log_file is not None:
            _banner(log_file, f"start {name} from the warm standby (pid {standby.pid}): "
                              f"{' '.join(argv)}")
        try:
            standby.stdin.write(order.model_dump_json().encode() + b"\n")
            standby.stdin.close()
        except OSError:  # it died in this instant
            _killpg(standby.pid, signal.SIGKILL)
            standby.wait(10)
            return None
        return standby

    def hold_standby(self, held: bool) -> None:
        """While held, no standby starts: a start-up whose replicas come one after the other
        (the supervisor's) is one burst, and a standby started inside it would compete with
        their warm-ups for a fresh engine, or be taken by the next of them. Released, the
        next standby follows `standby_delay` s later."""
        with self._lock:
            self._standby_held = held
            if not held:
                self._arm_standby()

    def _arm_standby(self) -> None:
        """Start the next standby once starts have been quiet for `standby_delay` s, so it
        never competes with a burst of replicas warming up (`up`, a scale)."""
        if not self.config.standby or self._closing or self._standby_held:
            return
        if self._standby_timer is not None:
            self._standby_timer.cancel()
        self._standby_timer = threading.Timer(self.config.standby_delay, self._start_standby)
        self._standby_timer.daemon = True
        self._standby_timer.start()

    def _start_standby(self) -> None:
        with self._lock:
            if self._closing or (self._standby is not None and self._standby.poll() is None):
                return
            argv = [*self.config.argv(STANDBY_NAME, self._options), "--standby"]
            log_file = (Path(self.config.log_dir) / f"{STANDBY_NAME}.log"
                        if self.config.log_dir else None)
            try:
                self._standby = self._spawner.call(
                    lambda: self._launch(argv, log_file, stdin=subprocess.PIPE))
            except OSError as exc:  # the next start is cold, as without a standby
                self._recent.append({"ts": time.time(), "replica": STANDBY_NAME,
                                     "action": "standby-failed", "error": str(exc)})

    def _end_standby(self) -> None:
        if self._standby_timer is not None:
            self._standby_timer.cancel()
        standby, self._standby = self._standby, None
        if standby is None:
            return
        with contextlib.suppress(OSError):
            standby.stdin.close()  # EOF: a waiting standby exits at once
        if standby.poll() is None:
            _killpg(standby.pid, signal.SIGTERM)  # one still warming up has no handler yet
            try:
                standby.wait(5)
            except subprocess.TimeoutExpired:
                _killpg(standby.pid, signal.SIGKILL)
                standby.wait(10)

    def _wait(self, rec: ReplicaProcess) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, rec.pid, os.WEXITED | os.WNOWAIT)
        respawn = False
        with self._lock:
            _killpg(rec.pid, signal.SIGKILL)  # its own children, while the pgid is still ours
            rec.returncode = rec.popen.wait()
            rec.reaped = True
            rec.ended_at = time.time()
            if rec.timer:
                rec.timer.cancel()
            if rec.intent == "kill":
                rec.state = "killed"
            elif rec.intent in ("stop", "restart", "shutdown"):
                rec.state = "stopped"
            elif rec.returncode == 0:
                rec.state = "exited"
            else:
                rec.state = "crashed"
                rec.crashes += 1
            self._note(rec, "exit", returncode=rec.returncode, state=rec.state)
            respawn = rec.intent == "restart" and not self._closing
            if respawn:
                self._via = "restart"  # this start is the second half of the restart
                try:
                    self._spawn(rec.name, restarts=rec.restarts + 1, crashes=rec.crashes,
                                options=rec.options)
                except PoolError as exc:
                    self._note(rec, "restart-failed", error=str(exc))
                finally:
                    self._via = None
            self._changed.notify_all()

    def _note(self, rec: ReplicaProcess, action: str, **extra: Any) -> None:
        event = {"ts": time.time(), "replica": rec.name, "action": action, "pid": rec.pid,
                 **({"via": self._via} if self._via else {}), **extra}
        self._recent.append(event)
        if self._on_event:
            with contextlib.suppress(Exception):
                self._on_event(event)
