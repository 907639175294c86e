"""The memory in SQLite (standard library): one file under the data directory, WAL mode.

WAL lets a writer commit while readers in other processes (the dashboard, `groupscope
history`) read the last committed state, and makes each cycle's transaction atomic: a writer
killed mid-write leaves the file as it was before that transaction. Two writing processes
(say `exporter` and `watch`) serialise on SQLite's lock, waiting up to BUSY_TIMEOUT_MS.

Lag is written as raw points, one row per group per cycle, and folded every few minutes
(`maintain`) into one compressed block per group per hour (`chunks.py`), which is what keeps
days of every cycle's lag in little space; the hour still filling waits in `lag_open`, so a
finished hour's block is written once. Episodes are stored as zlib-compressed JSON
(EPISODE_JSON) beside the columns they are searched and sorted by. Episodes and blocks (a
kilobyte or more a row) are rowid tables: in a WITHOUT ROWID table a row that size spills
into an overflow page of its own, four times the bytes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import orjson

from backend.contracts.history import (
    ACTION_CAUSES,
    EPISODE_JSON,
    Action,
    AuditEntry,
    Episode,
    StateChange,
)
from backend.history.chunks import MISSING, LagBlock, decode, encode
from backend.history.store import (
    ClusterInfo,
    CounterKey,
    Cycle,
    HistoryStore,
    Seed,
    StoreError,
)

# 2: the open hour's lag apart (lag_open), episode bodies compressed; 3: the audit of writes
SCHEMA_VERSION = 3
BUSY_TIMEOUT_MS = 5000
HOUR_MS = 3_600_000
# raw lag points younger than this stay raw at a fold: the open hour's block is then
# rewritten a few times an hour, not every cycle
RAW_KEEP_MS = 120_000
EPISODE_LEVEL = 6  # zlib level of an episode's JSON body
# a page holds fifteen hour blocks of a kilobyte, not three: SQLite's 4 KiB left a fifth of
# every page empty (bench/README.md, "The memory")
PAGE_BYTES = 16384
WAL_LIMIT_BYTES = 64 << 20  # the WAL file is truncated back to this after a checkpoint
# an episode still open this long before a span began is a writer that stopped mid-episode,
# not a rebalance still going: it does not overlap the span
OPEN_FOR_MS = 3_600_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clusters(
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
    seen_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS groups(
    id INTEGER PRIMARY KEY, cluster_id INTEGER NOT NULL, name TEXT NOT NULL,
    UNIQUE(cluster_id, name));
CREATE TABLE IF NOT EXISTS episodes(
    group_id INTEGER NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER,
    cause TEXT NOT NULL, final INTEGER NOT NULL, rebalance INTEGER NOT NULL, body BLOB NOT NULL,
    UNIQUE(group_id, start_ms));
CREATE INDEX IF NOT EXISTS episodes_by_time ON episodes(start_ms);
CREATE TABLE IF NOT EXISTS states(
    group_id INTEGER NOT NULL, ts_ms INTEGER NOT NULL, state TEXT NOT NULL,
    protocol TEXT NOT NULL, assignor TEXT, members INTEGER NOT NULL, generation INTEGER,
    PRIMARY KEY(group_id, ts_ms)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS states_by_time ON states(ts_ms);
CREATE TABLE IF NOT EXISTS lag_raw(
    group_id INTEGER NOT NULL, ts_ms INTEGER NOT NULL, lag INTEGER NOT NULL,
    lag_tenths INTEGER NOT NULL, parts BLOB,
    PRIMARY KEY(group_id, ts_ms)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS lag_raw_by_time ON lag_raw(ts_ms);
CREATE TABLE IF NOT EXISTS lag_blocks(
    group_id INTEGER NOT NULL, hour_ms INTEGER NOT NULL, data BLOB NOT NULL,
    UNIQUE(group_id, hour_ms));
CREATE INDEX IF NOT EXISTS lag_blocks_by_time ON lag_blocks(hour_ms);
CREATE TABLE IF NOT EXISTS lag_open(
    group_id INTEGER NOT NULL, hour_ms INTEGER NOT NULL, data BLOB NOT NULL,
    UNIQUE(group_id, hour_ms));
CREATE TABLE IF NOT EXISTS actions(
    id INTEGER PRIMARY KEY, cluster_id INTEGER NOT NULL, ts_ms INTEGER NOT NULL,
    grp TEXT NOT NULL, replica TEXT NOT NULL, action TEXT NOT NULL, exit_code INTEGER,
    by TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS actions_by_time ON actions(cluster_id, ts_ms);
CREATE TABLE IF NOT EXISTS audit(
    ts_ms INTEGER NOT NULL, user TEXT NOT NULL, via TEXT NOT NULL, cluster TEXT NOT NULL,
    grp TEXT NOT NULL, action TEXT NOT NULL, changes TEXT NOT NULL, refused TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_by_time ON audit(ts_ms);
CREATE TABLE IF NOT EXISTS counters(
    group_id INTEGER NOT NULL, name TEXT NOT NULL, label TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY(group_id, name, label)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS writers(
    cluster_id INTEGER PRIMARY KEY, owner TEXT NOT NULL, until_ms INTEGER NOT NULL);
"""


def explain(path: str | Path, exc: BaseException) -> str:
    """One line naming the file, what is wrong with it and what to do."""
    text = str(exc).strip() or type(exc).__name__
    low = text.lower()
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        what = (f"is damaged ({text}); move it aside (the live view goes on without the "
                f"memory) and a new one is started")
    elif "locked" in low or "busy" in low:
        what = f"is locked by another process ({text}); retrying"
    elif "full" in low or "no space" in low:
        what = f"cannot grow: the disk is full ({text}); free space or lower --history-max-mb"
    elif isinstance(exc, (FileExistsError, NotADirectoryError)):
        what = (f"cannot be made: a file stands where its directory should be ({text}); "
                f"point --history elsewhere")
    elif "readonly" in low or "read-only" in low or "permission" in low or "unable to open" \
            in low:
        what = (f"cannot be written ({text}); make it and its directory writable, or point "
                f"--history elsewhere")
    elif "newer" in low:
        what = text
    else:
        what = f"cannot be used ({text})"
    return f"history store {path} {what}"


def _parts(data: bytes | None) -> dict[tuple[str, int], int] | None:
    return None if data is None else {(t, p): v for t, p, v in orjson.loads(data)}


class SqliteStore(HistoryStore):
    """The memory in one SQLite file; every method is thread-safe (one connection, a lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._groups: dict[tuple[int, str], int] = {}
        self._clusters: dict[str, int] = {}
        try:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                                       isolation_level=None, check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(explain(self.path, exc)) from None
        try:
            self._setup()
        except sqlite3.Error as exc:
            self._db.close()
            raise StoreError(explain(self.path, exc)) from None

    def _setup(self) -> None:
        db = self._db
        db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        fresh = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        if fresh:  # both before the first table (and the page size before WAL)
            db.execute(f"PRAGMA page_size={PAGE_BYTES}")
            db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        if db.execute("PRAGMA journal_mode=WAL").fetchone()[0].lower() != "wal":
            raise sqlite3.OperationalError("cannot switch to WAL mode")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        if self._schema() == SCHEMA_VERSION:
            return  # nothing to create: opening needs no write lock
        with self._tx():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute("INSERT OR REPLACE INTO meta VALUES('schema', ?)",
                       (str(SCHEMA_VERSION),))

    def _schema(self) -> int | None:
        """The file's schema version; None before it has one. A newer one than this code
        reads is refused rather than misread."""
        try:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return None
            raise
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise sqlite3.OperationalError(
                f"was written by a newer groupscope (schema {row[0]}, this one reads "
                f"{SCHEMA_VERSION}); upgrade groupscope or point --history elsewhere")
        return None if row is None else int(row[0])

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (BEGIN IMMEDIATE) so it never has to upgrade
        a read lock halfway and deadlock against another writer."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                self._groups.clear()  # ids made in the rolled-back transaction are gone
                self._clusters.clear()
                raise
            self._db.execute("COMMIT")

    def _call(self, what, *args):
        """Run a method's body, turning SQLite's errors into one line."""
        try:
            return what(*args)
        except sqlite3.Error as exc:
            raise StoreError(explain(self.path, exc)) from None

    # ---- ids ------------------------------------------------------------------------------

    def _cluster_id(self, db: sqlite3.Connection, key: str, name: str | None = None,
                    seen_ms: int | None = None) -> int:
        cid = self._clusters.get(key)
        if cid is None:
            db.execute("INSERT OR IGNORE INTO clusters(key, name) VALUES(?, ?)",
                       (key, name or key))
            cid = db.execute("SELECT id FROM clusters WHERE key=?", (key,)).fetchone()[0]
            self._clusters[key] = cid
        if seen_ms is not None:
            db.execute("UPDATE clusters SET seen_ms=max(seen_ms, ?), name=coalesce(?, name) "
                       "WHERE id=?", (seen_ms, name, cid))
        return cid

    def _known_cluster(self, key: str) -> int | None:
        cid = self._clusters.get(key)
        if cid is None:
            row = self._db.execute("SELECT id FROM clusters WHERE key=?", (key,)).fetchone()
            cid = None if row is None else row[0]
        return cid

    def _group_id(self, db: sqlite3.Connection, cid: int, name: str) -> int:
        gid = self._groups.get((cid, name))
        if gid is None:
            db.execute("INSERT OR IGNORE INTO groups(cluster_id, name) VALUES(?, ?)",
                       (cid, name))
            gid = db.execute("SELECT id FROM groups WHERE cluster_id=? AND name=?",
                             (cid, name)).fetchone()[0]
            self._groups[(cid, name)] = gid
        return gid

    # ---- writing --------------------------------------------------------------------------

    def claim(self, cluster: str, owner: str, now_ms: int, ttl_ms: int) -> bool:
        def run() -> bool:
            with self._tx() as db:
                cid = self._cluster_id(db, cluster)
                row = db.execute("SELECT owner, until_ms FROM writers WHERE cluster_id=?",
                                 (cid,)).fetchone()
                if row is not None and row[0] != owner and row[1] > now_ms:
                    return False
                db.execute("INSERT OR REPLACE INTO writers VALUES(?, ?, ?)",
                           (cid, owner, now_ms + ttl_ms))
                return True
        return self._call(run)

    def release(self, cluster: str, owner: str) -> None:
        def run() -> None:
            with self._tx() as db:
                cid = self._known_cluster(cluster)
                if cid is not None:
                    db.execute("DELETE FROM writers WHERE cluster_id=? AND owner=?",
                               (cid, owner))
        self._call(run)

    def write(self, cycle: Cycle) -> None:
        self._call(self._write, cycle)

    def _write(self, cycle: Cycle) -> None:
        with self._tx() as db:
            cid = self._cluster_id(db, cycle.cluster, cycle.name, cycle.taken_ms)
            gid = lambda g: self._group_id(db, cid, g)  # noqa: E731
            if cycle.episodes:
                db.executemany(
                    "INSERT INTO episodes VALUES(?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(group_id, start_ms) DO UPDATE SET end_ms=excluded.end_ms, "
                    "cause=excluded.cause, final=excluded.final, "
                    "rebalance=excluded.rebalance, body=excluded.body",
                    [(gid(e.group), e.start_ms, e.end_ms, e.cause, int(e.final),
                      int(e.rebalance), zlib.compress(EPISODE_JSON.dump_json(e), EPISODE_LEVEL))
                     for e in cycle.episodes])
            if cycle.states:
                db.executemany(
                    "INSERT OR REPLACE INTO states VALUES(?, ?, ?, ?, ?, ?, ?)",
                    [(gid(s.group), s.ts_ms, s.state, s.protocol, s.assignor, s.members,
                      s.generation) for s in cycle.states])
            if cycle.lag:
                db.executemany(
                    "INSERT OR REPLACE INTO lag_raw VALUES(?, ?, ?, ?, ?)",
                    [(gid(p.group), p.ts_ms, p.lag,
                      MISSING if p.lag_seconds is None else round(p.lag_seconds * 10),
                      None if p.partitions is None else orjson.dumps(
                          [[t, n, v] for (t, n), v in p.partitions.items()]))
                     for p in cycle.lag])
            if cycle.counters:
                db.executemany(
                    "INSERT INTO counters VALUES(?, ?, ?, ?) "
                    "ON CONFLICT(group_id, name, label) DO UPDATE SET "
                    "value=max(value, excluded.value)",
                    [(gid(k.group), k.name, k.label, v) for k, v in cycle.counters.items()])

    def add_action(self, cluster: str, action: Action) -> None:
        def run() -> None:
            with self._tx() as db:
                cid = self._cluster_id(db, cluster)
                db.execute("INSERT INTO actions(cluster_id, ts_ms, grp, replica, action, "
                           "exit_code, by) VALUES(?, ?, ?, ?, ?, ?, ?)",
                           (cid, action.ts_ms, action.group, action.replica, action.action,
                            action.exit_code, action.by))
        self._call(run)

    def add_audit(self, entry: AuditEntry) -> None:
        def run() -> None:
            with self._tx() as db:
                db.execute("INSERT INTO audit VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                           (entry.ts_ms, entry.user, entry.via, entry.cluster, entry.group,
                            entry.action, "\n".join(entry.changes), "\n".join(entry.refused)))
        self._call(run)

    # ---- upkeep ---------------------------------------------------------------------------

    def maintain(self, now_ms: int, retention_ms: int, max_bytes: int) -> dict[str, int]:
        return self._call(self._maintain, now_ms, retention_ms, max_bytes)

    def _maintain(self, now_ms: int, retention_ms: int, max_bytes: int) -> dict[str, int]:
        done = {"folded": self._fold(now_ms - RAW_KEEP_MS)}
        oldest = now_ms - retention_ms
        with self._tx() as db:
            done["expired"] = sum(db.execute(sql, (arg,)).rowcount for sql, arg in (
                ("DELETE FROM episodes WHERE start_ms < ?", oldest),
                ("DELETE FROM states WHERE ts_ms < ?", oldest),
                ("DELETE FROM lag_blocks WHERE hour_ms < ?", oldest - HOUR_MS),
                ("DELETE FROM lag_open WHERE hour_ms < ?", oldest - HOUR_MS),
                ("DELETE FROM lag_raw WHERE ts_ms < ?", oldest),
                ("DELETE FROM actions WHERE ts_ms < ?", oldest),
                ("DELETE FROM audit WHERE ts_ms < ?", oldest)))
        done["trimmed"] = self._trim(max_bytes)
        with self._lock:
            # executescript steps it to the end; execute() would free one page
            self._db.executescript("PRAGMA incremental_vacuum;")
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return done

    def _fold(self, before_ms: int) -> int:
        """Raw lag points older than `before_ms` into their group's hourly blocks.

        An hour still filling is kept in `lag_open` (one row a group) and rewritten at each
        fold; once the hour is over its block goes into `lag_blocks` once. Rewriting rows in
        `lag_blocks` itself left holes in its pages that later rows never fill (a new rowid
        goes at the end), and cost 1.7x the blocks' bytes."""
        closed_before = before_ms - before_ms % HOUR_MS  # hours that began before it are over
        folded = 0
        with self._tx() as db:
            raw = db.execute("SELECT group_id, ts_ms, lag, lag_tenths, parts FROM lag_raw "
                             "WHERE ts_ms < ? ORDER BY group_id, ts_ms", (before_ms,))
            # one group at a time: a watch's first fold holds every group's first points with
            # their partitions, which read all at once made its memory jump with the cluster's
            # size (bench/README.md, watch's memory at 65 000 groups)
            for gid, points in itertools.groupby(raw, key=lambda row: row[0]):
                blocks: dict[int, LagBlock] = {}
                for _gid, ts, lag, tenths, parts in points:
                    folded += 1
                    block = blocks.setdefault(ts - ts % HOUR_MS, LagBlock())
                    block.times.append(ts)
                    block.lags.append(lag)
                    block.lag_tenths.append(tenths)
                    if parts is not None:
                        block.add_partitions(ts, _parts(parts) or {})
                for hour, new in blocks.items():
                    self._fold_block(db, gid, hour, new, closed_before)
            # the hours that ended with no point since the last fold (a group gone quiet)
            db.execute("INSERT OR REPLACE INTO lag_blocks SELECT group_id, hour_ms, data "
                       "FROM lag_open WHERE hour_ms < ?", (closed_before,))
            db.execute("DELETE FROM lag_open WHERE hour_ms < ?", (closed_before,))
            db.execute("DELETE FROM lag_raw WHERE ts_ms < ?", (before_ms,))
            return folded

    @staticmethod
    def _fold_block(db: sqlite3.Connection, gid: int, hour: int, new: LagBlock,
                    closed_before: int) -> None:
        """One group's new points of one hour into its block: `lag_blocks` once the hour is
        over, else `lag_open`."""
        block = LagBlock()
        for table in ("lag_blocks", "lag_open"):  # a late point of a closed hour
            row = db.execute(f"SELECT data FROM {table} WHERE group_id=? AND hour_ms=?",
                             (gid, hour)).fetchone()
            if row is not None:
                block.extend(decode(row[0]))
        block.extend(new)
        table = "lag_blocks" if hour < closed_before else "lag_open"
        db.execute(f"INSERT OR REPLACE INTO {table} VALUES(?, ?, ?)",
                   (gid, hour, encode(block, finished=table == "lag_blocks")))
        if table == "lag_blocks":
            db.execute("DELETE FROM lag_open WHERE group_id=? AND hour_ms=?", (gid, hour))

    def _used_bytes(self) -> int:
        page = self._db.execute("PRAGMA page_size").fetchone()[0]
        count = self._db.execute("PRAGMA page_count").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0]
        return (count - free) * page

    def _trim(self, max_bytes: int) -> int:
        """Over the bound: the oldest hour of lag, then of states, then of episodes, until the
        store is under 90 % of it."""
        dropped = 0
        for table, column in (("lag_blocks", "hour_ms"), ("states", "ts_ms"),
                              ("episodes", "start_ms")):
            while True:
                with self._lock:
                    if self._used_bytes() <= max_bytes * 0.9:
                        return dropped
                    row = self._db.execute(f"SELECT min({column}) FROM {table}").fetchone()
                if row[0] is None:
                    break
                with self._tx() as db:
                    dropped += db.execute(f"DELETE FROM {table} WHERE {column} < ?",
                                          (row[0] + HOUR_MS,)).rowcount
        return dropped

    # ---- reading --------------------------------------------------------------------------

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        def run() -> list[tuple]:
            with self._lock:
                return self._db.execute(sql, args).fetchall()
        return self._call(run)

    def clusters(self) -> list[ClusterInfo]:
        return [ClusterInfo(k, n, s) for k, n, s in
                self._read("SELECT key, name, seen_ms FROM clusters ORDER BY seen_ms DESC")]

    def _cid(self, cluster: str) -> int | None:
        with self._lock:
            return self._call(self._known_cluster, cluster)

    def seed(self, cluster: str, since_ms: int) -> Seed:
        cid = self._cid(cluster)
        if cid is None:
            return Seed({}, {}, {})
        starts: dict[str, list[int]] = {}
        for name, start in self._read(
                "SELECT g.name, e.start_ms FROM episodes e JOIN groups g ON g.id=e.group_id "
                "WHERE g.cluster_id=? AND e.start_ms>=? AND e.rebalance ORDER BY e.start_ms",
                (cid, since_ms)):
            starts.setdefault(name, []).append(start)
        last = {name: (start, cause) for name, start, cause in self._read(
            "SELECT g.name, max(e.start_ms), e.cause FROM episodes e "
            "JOIN groups g ON g.id=e.group_id WHERE g.cluster_id=? AND e.end_ms IS NOT NULL "
            "AND e.rebalance GROUP BY e.group_id", (cid,))}
        return Seed({g: tuple(v) for g, v in starts.items()}, last, self.counters(cluster))

    def actions(self, cluster: str, since_ms: int) -> list[Action]:
        cid = self._cid(cluster)
        if cid is None:
            return []
        return [Action(ts, grp, replica, action, code, by)
                for ts, grp, replica, action, code, by in self._read(
                    "SELECT ts_ms, grp, replica, action, exit_code, by FROM actions "
                    "WHERE cluster_id=? AND ts_ms>=? ORDER BY ts_ms", (cid, since_ms))
                if action in ACTION_CAUSES]

    def audit(self, since_ms: int, group: str | None = None) -> list[AuditEntry]:
        rows = self._read("SELECT ts_ms, user, via, cluster, grp, action, changes, refused "
                          "FROM audit WHERE ts_ms>=? AND (? IS NULL OR grp=?) ORDER BY ts_ms",
                          (since_ms, group, group))
        return [AuditEntry(ts, user, via, cluster, grp, action,
                           tuple(changes.splitlines()), tuple(refused.splitlines()))
                for ts, user, via, cluster, grp, action, changes, refused in rows]

    def groups(self, cluster: str) -> list[str]:
        cid = self._cid(cluster)
        return [] if cid is None else [n for (n,) in self._read(
            "SELECT name FROM groups WHERE cluster_id=? ORDER BY name", (cid,))]

    def _gid(self, cluster: str, group: str) -> int | None:
        cid = self._cid(cluster)
        if cid is None:
            return None
        row = self._read("SELECT id FROM groups WHERE cluster_id=? AND name=?", (cid, group))
        return row[0][0] if row else None

    def episodes(self, cluster: str, group: str | None = None, since_ms: int | None = None,
                 until_ms: int | None = None, limit: int | None = None) -> list[Episode]:
        cid = self._cid(cluster)
        if cid is None:
            return []
        where, args = ["g.cluster_id=?"], [cid]
        if group is not None:
            where.append("g.name=?")
            args.append(group)
        if since_ms is not None:  # overlapping: begun before the span and not ended by it
            where.append("coalesce(e.end_ms, e.start_ms, 0) >= ? AND "
                         "(e.end_ms IS NOT NULL OR e.start_ms >= ? - ?)")
            args.extend([since_ms, since_ms, OPEN_FOR_MS])
        if until_ms is not None:
            where.append("e.start_ms<=?")
            args.append(until_ms)
        sql = (f"SELECT e.body FROM episodes e JOIN groups g ON g.id=e.group_id "
               f"WHERE {' AND '.join(where)} ORDER BY e.start_ms DESC")
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._read(sql, tuple(args))
        return [_episode(body) for (body,) in reversed(rows)]

    def states(self, cluster: str, group: str, since_ms: int,
               until_ms: int | None = None) -> list[StateChange]:
        gid = self._gid(cluster, group)
        if gid is None:
            return []
        return [StateChange(ts, group, state, proto, assignor, members, gen)
                for ts, state, proto, assignor, members, gen in self._read(
                    "SELECT ts_ms, state, protocol, assignor, members, generation FROM states "
                    "WHERE group_id=? AND ts_ms>=? AND ts_ms<=? ORDER BY ts_ms",
                    (gid, since_ms, until_ms if until_ms is not None else 1 << 62))]

    def lag(self, cluster: str, group: str, since_ms: int, until_ms: int | None = None,
            partitions: bool = True) -> LagBlock:
        gid = self._gid(cluster, group)
        out = LagBlock()
        if gid is None:
            return out
        until = until_ms if until_ms is not None else 1 << 62
        hour = since_ms - since_ms % HOUR_MS
        blocks = self._read("SELECT data FROM (SELECT hour_ms, data FROM lag_blocks WHERE "
                            "group_id=? AND hour_ms>=? AND hour_ms<=? UNION ALL SELECT "
                            "hour_ms, data FROM lag_open WHERE group_id=? AND hour_ms>=? AND "
                            "hour_ms<=?) ORDER BY hour_ms", (gid, hour, until, gid, hour, until))
        for (data,) in blocks:
            block = decode(data)
            if not partitions:
                block.keys, block.part_times, block.part_lags = [], [], []
            out.extend(block)
        for ts, lag, tenths, parts in self._read(
                "SELECT ts_ms, lag, lag_tenths, parts FROM lag_raw WHERE group_id=? "
                "AND ts_ms>=? AND ts_ms<=? ORDER BY ts_ms", (gid, since_ms, until)):
            out.times.append(ts)
            out.lags.append(lag)
            out.lag_tenths.append(tenths)
            if parts is not None and partitions:
                out.add_partitions(ts, _parts(parts) or {})
        return _clip(out, since_ms, until)

    def counters(self, cluster: str) -> dict[CounterKey, float]:
        cid = self._cid(cluster)
        return {} if cid is None else {
            CounterKey(g, n, lbl): v for g, n, lbl, v in self._read(
                "SELECT g.name, c.name, c.label, c.value FROM counters c "
                "JOIN groups g ON g.id=c.group_id WHERE g.cluster_id=?", (cid,))}

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(OSError):
                total += os.path.getsize(self.path + suffix)
        return total

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()


def _episode(body: bytes) -> Episode:
    """An episode's row body: zlib-compressed JSON (schema 1 kept it plain)."""
    return EPISODE_JSON.validate_json(body if body[:1] == b"{" else zlib.decompress(body))


def _clip(block: LagBlock, since_ms: int, until_ms: int) -> LagBlock:
    """Only the points in [since, until]; blocks are whole hours and overlap the edges."""
    keep = [i for i, t in enumerate(block.times) if since_ms <= t <= until_ms]
    steps = [i for i, t in enumerate(block.part_times) if since_ms <= t <= until_ms]
    if len(keep) == len(block.times) and len(steps) == len(block.part_times):
        return block
    return LagBlock(times=[block.times[i] for i in keep], lags=[block.lags[i] for i in keep],
                    lag_tenths=[block.lag_tenths[i] for i in keep], keys=block.keys,
                    part_times=[block.part_times[i] for i in steps],
                    part_lags=[block.part_lags[i] for i in steps])
