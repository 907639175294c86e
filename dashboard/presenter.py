"""Who may control the stack from a browser session: the presenter, or a viewer.

In a workshop room every participant opens the dashboard; only the presenter may start, kill
or scale replicas. The presenter is the browser on the presenter's own machine: the TCP peer
of its websocket is a loopback address, or one of this machine's own addresses (`up --room`
may serve the dashboard on the room address only, and a browser on this machine opening that
URL connects from it). Neither can come from another machine: the kernel drops packets from
the network that carry a local source address, and a blind TCP handshake cannot be completed.
Everyone else is a viewer, and so is a session whose peer is unknown.

The peer is Streamlit's raw `client_context.remote_ip`, not `st.context.ip_address` (which
turns loopback into None, the same None that means "unknown"). uvicorn rewrites that peer from
X-Forwarded-For for the hosts in FORWARDED_ALLOW_IPS (loopback by default): when that list
trusts anything else, any browser could claim to be loopback, so nobody is a presenter by
address.

In room mode (`up --room` wrote room.json and the 0600 passcode file) a viewer may unlock the
controls for its own session with the presenter passcode, e.g. on a tablet at the front.
Wrong passcodes are counted per client address (per /64 for IPv6, where one machine holds many
addresses); after PASSCODE_TRIES of them the address is locked out for PASSCODE_LOCKOUT_S.
That state lives in this module, once per server process, not in st.cache_resource: any
browser can send Streamlit's "clear cache" message, which empties st.cache_resource for every
session and would reset a lock-out.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import Enum
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

from backend.contracts.room import (
    PASSCODE_FILE,
    PASSCODE_LOCKOUT_S,
    PASSCODE_TRIES,
    read_room,
    read_secret,
)
from backend.paths import data_dir
from dashboard.logs import dashboard_log

ENV_LOCKOUT_S = "GROUPSCOPE_PASSCODE_LOCKOUT_S"  # a shorter lock-out, for tests and rehearsals
ENV_FORWARDED = "FORWARDED_ALLOW_IPS"  # uvicorn: whose X-Forwarded-For it believes
UNKNOWN = "unknown"  # the lock-out key of every session whose peer is not known

log = dashboard_log("groupscope.dashboard.presenter", "presenter")


class Role(Enum):
    PRESENTER = "presenter"
    VIEWER = "viewer"


# ---- peer address → role (pure) ------------------------------------------------------------

def parse_peer(peer: object) -> IPv4Address | IPv6Address | None:
    """The peer as an address, IPv4-mapped IPv6 (a dual-stack listener's view of an IPv4
    client, `::ffff:127.0.0.1`) unwrapped to IPv4; None for anything that is not an address."""
    if not isinstance(peer, str):
        return None
    try:
        addr = ip_address(peer.split("%", 1)[0])  # drop an IPv6 zone (fe80::1%eth0)
    except ValueError:
        return None
    if isinstance(addr, IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def forwarding_trusts_only_loopback(allowed: str | None) -> bool:
    """Whether uvicorn's FORWARDED_ALLOW_IPS lets only loopback rewrite the peer (None: unset,
    uvicorn's default of 127.0.0.1 and ::1). A wildcard, a network or any other host means a
    header, not the TCP peer, may decide who the client is."""
    if allowed is None:
        return True
    for item in allowed.split(","):
        item = item.strip()
        if not item:
            continue
        addr = parse_peer(item)
        if addr is None or not addr.is_loopback:
            return False
    return True


def peer_role(peer: object, own_addresses: Collection[str] = (),
              forwarded_allow_ips: str | None = None) -> Role:
    """PRESENTER for a peer on this machine (loopback, or one of `own_addresses`), as long
    as the peer cannot have come from a forwarding header; VIEWER for any other peer and for
    an unknown one."""
    addr = parse_peer(peer)
    if addr is None or not forwarding_trusts_only_loopback(forwarded_allow_ips):
        return Role.VIEWER
    if addr.is_loopback:
        return Role.PRESENTER
    own = {parse_peer(a) for a in own_addresses} - {None}
    if addr in own and not addr.is_unspecified:
        return Role.PRESENTER
    return Role.VIEWER


def lockout_key(peer: object) -> str:
    """What wrong passcodes are counted against: the IPv4 address, the IPv6 /64 (a host picks
    new addresses in its /64 at will), or UNKNOWN for every session without a known peer."""
    addr = parse_peer(peer)
    if addr is None:
        return UNKNOWN
    if isinstance(addr, IPv6Address):
        return str(ip_network(f"{addr}/64", strict=False))
    return str(addr)


def passcode_matches(given: str, secret: str) -> bool:
    """Constant-time comparison; both sides hashed first so not even the length leaks."""
    a = hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest()
    b = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(a, b)


# ---- wrong passcodes and lock-outs ----------------------------------------------------------

class Verdict(Enum):
    ACCEPTED = "accepted"
    WRONG = "wrong"
    LOCKED = "locked"
    NO_ROOM = "no room"  # not in room mode: there is no passcode to try


@dataclass(frozen=True)
class Attempt:
    verdict: Verdict
    tries_left: int  # wrong tries this address still has before a lock-out
    locked_for_s: float  # seconds until the address may try again (0 when it may)


@dataclass
class _Record:
    wrong: int = 0
    last_wrong: float = 0.0
    locked_until: float = 0.0


class PasscodeGuard:
    """Wrong passcodes per client address, and lock-outs; thread-safe, one per server.

    A lock-out starts at the `tries`-th wrong passcode in a row and lasts `lockout_s`; every
    try during it is refused, the right passcode too, and does not extend it. Wrong tries
    older than `lockout_s` are forgotten, so a typo an hour ago does not count.
    """

    def __init__(self, tries: int = PASSCODE_TRIES, lockout_s: float = PASSCODE_LOCKOUT_S,
                 clock: Callable[[], float] = time.monotonic, max_records: int = 4096) -> None:
        self.tries = tries
        self.lockout_s = lockout_s
        self._clock = clock
        self._max_records = max_records
        self._lock = threading.Lock()
        self._records: dict[str, _Record] = {}

    def locked_for(self, key: str) -> float:
        """Seconds until `key` may try again; 0 when it may now."""
        with self._lock:
            rec = self._records.get(key)
            return max(0.0, rec.locked_until - self._clock()) if rec else 0.0

    def attempt(self, key: str, given: str, secret: str) -> Attempt:
        """Check one passcode from `key`; logs every wrong try, lock-out and refusal."""
        with self._lock:
            now = self._clock()
            rec = self._records.get(key)
            if rec is not None and rec.locked_until > now:
                left = rec.locked_until - now
                log.warning("presenter passcode refused from %s: locked out for %.0f s more",
                            key, left)
                return Attempt(Verdict.LOCKED, 0, left)
            if rec is not None and (rec.locked_until or now - rec.last_wrong > self.lockout_s):
                rec = None  # a lock-out that has ended, or wrong tries long forgotten
                self._records.pop(key, None)
            if passcode_matches(given, secret):
                self._records.pop(key, None)
                log.info("presenter passcode accepted from %s: that session has the controls",
                         key)
                return Attempt(Verdict.ACCEPTED, self.tries, 0.0)
            if rec is None:
                self._prune(now)
                rec = self._records[key] = _Record()
            rec.wrong += 1
            rec.last_wrong = now
            log.warning("wrong presenter passcode from %s (%d of %d)", key, rec.wrong, self.tries)
            if rec.wrong < self.tries:
                return Attempt(Verdict.WRONG, self.tries - rec.wrong, 0.0)
            rec.locked_until = now + self.lockout_s
            log.warning("presenter passcode locked for %s: %d wrong tries, locked out for %.0f s",
                        key, rec.wrong, self.lockout_s)
            return Attempt(Verdict.LOCKED, 0, self.lockout_s)

    def _prune(self, now: float) -> None:
        """Bound the table: drop what no longer matters, then the oldest if still full."""
        if len(self._records) < self._max_records:
            return
        for key, rec in list(self._records.items()):
            if rec.locked_until <= now and now - rec.last_wrong > self.lockout_s:
                del self._records[key]
        # never forget a live lock-out to make room: the oldest other records go first
        evictable = sorted((rec.last_wrong, key) for key, rec in self._records.items()
                           if rec.locked_until <= now)
        for _, key in evictable[:len(self._records) - self._max_records + 1]:
            del self._records[key]


class UnlockedSessions:
    """Sessions a passcode made presenters, each tied to the lock-out key it unlocked from,
    so a session id taken over from another address is no presenter. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}

    def add(self, session_id: str, key: str) -> None:
        with self._lock:
            self._sessions[session_id] = key

    def holds(self, session_id: str, key: str) -> bool:
        with self._lock:
            return self._sessions.get(session_id) == key


def lockout_s_from_env(default: float = PASSCODE_LOCKOUT_S) -> float:
    """The lock-out window, shortened through ENV_LOCKOUT_S (never below 1 s)."""
    try:
        return max(1.0, float(os.environ[ENV_LOCKOUT_S]))
    except (KeyError, ValueError):
        return default


_GUARD = PasscodeGuard(lockout_s=lockout_s_from_env())
_UNLOCKED = UnlockedSessions()


# ---- this browser session (reads Streamlit's runtime) ---------------------------------------

def session_id() -> str | None:
    """The running script's session id, None outside a script run."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else None


def session_peer() -> str | None:
    """The raw TCP peer of this session's websocket, None when unknown (no runtime, no such
    client, or anything that is not a string, e.g. under AppTest)."""
    from streamlit import runtime

    sid = session_id()
    if sid is None or not runtime.exists():
        return None
    client = runtime.get_instance().get_client(sid)
    context = getattr(client, "client_context", None) if client is not None else None
    peer = getattr(context, "remote_ip", None)
    return peer if isinstance(peer, str) else None


def own_addresses() -> set[str]:
    """Every address of this machine's interfaces."""
    import psutil

    return {a.address for addrs in psutil.net_if_addrs().values() for a in addrs
            if a.family.name in ("AF_INET", "AF_INET6")}


def room_passcode() -> str | None:
    """The presenter passcode when the stack runs as a room (room.json and the passcode
    file both present), else None: no room, no passcode box."""
    root = data_dir()
    if read_room(root) is None:
        return None
    return read_secret(root, PASSCODE_FILE)


def session_role() -> Role:
    """This session's role, decided afresh at every call from the websocket's peer and, in
    room mode, a passcode unlocked from that same peer."""
    peer = session_peer()
    if peer_role(peer, own_addresses(), os.environ.get(ENV_FORWARDED)) is Role.PRESENTER:
        return Role.PRESENTER
    sid = session_id()
    if sid is not None and _UNLOCKED.holds(sid, lockout_key(peer)) \
            and room_passcode() is not None:
        return Role.PRESENTER
    return Role.VIEWER


def is_presenter() -> bool:
    """Whether this session may act as the presenter (controls, revealing the Spark token)."""
    return session_role() is Role.PRESENTER


def try_passcode(given: str) -> Attempt:
    """Check a passcode typed in this session; on success this session becomes a presenter."""
    peer = session_peer()
    key = lockout_key(peer)
    secret = room_passcode()
    sid = session_id()
    if secret is None or sid is None:
        log.warning("presenter passcode refused from %s: not in room mode", key)
        return Attempt(Verdict.NO_ROOM, 0, 0.0)
    outcome = _GUARD.attempt(key, given, secret)
    if outcome.verdict is Verdict.ACCEPTED:
        _UNLOCKED.add(sid, key)
    return outcome


def passcode_locked_for() -> float:
    """Seconds this session's address must still wait before trying a passcode."""
    return _GUARD.locked_for(lockout_key(session_peer()))
