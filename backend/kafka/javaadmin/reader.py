"""What groupscope reads of a Kafka cluster, as plain data: the one reading layer.

Every read the observer, the overview, the supervisor and the exporter make goes through a
`KafkaReader`: groups of every type (classic, consumer, share, streams), their members and
assignments, committed offsets of many groups per request, log start/end offsets, offsets
for times, topic metadata (leaders, replicas, ISR) and the brokers. It talks to Kafka's Java
Admin in a supervised child (`gateway.py`); producing, consuming and the stack's own topic
set-up stay on confluent-kafka, so a replica needs no JVM.

Errors keep Kafka's names (`GROUP_ID_NOT_FOUND: ...`), the vocabulary Kafka's own tools and
the rest of groupscope use, whatever client produced them.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from backend.contracts import CLASSIC, CONSUMER, GROUP_TYPES, SHARE, STREAMS, Placement
from backend.kafka.groups import TP, GroupDescription, GroupMember, same_tp
from backend.kafka.javaadmin.gateway import CALL_TIMEOUT_S, AdminGateway, ReaderDown, ReaderError
from backend.kafka.settings import KafkaSettings

SEP = "\u0000"
DESCRIBE_BATCH = 500  # groups per describe call (one request per coordinator)
OFFSETS_BATCH = 1000  # groups per committed-offsets call (KIP-709: many per OffsetFetch)
LIST_OFFSETS_BATCH = 5000  # partitions per ListOffsets call

# Java exception names whose Kafka error name is not their camel case spelt out
_ERROR_NAMES = {
    "GroupAuthorizationException": "GROUP_AUTHORIZATION_FAILED",
    "TopicAuthorizationException": "TOPIC_AUTHORIZATION_FAILED",
    "ClusterAuthorizationException": "CLUSTER_AUTHORIZATION_FAILED",
    "UnknownTopicOrPartitionException": "UNKNOWN_TOPIC_OR_PART",
    "TimeoutException": "REQUEST_TIMED_OUT",
    "SaslAuthenticationException": "SASL_AUTHENTICATION_FAILED",
    "SslAuthenticationException": "SSL_AUTHENTICATION_FAILED",
}
# errors worth an immediate retry: a coordinator loading or moving (normal right after a
# broker starts). Not a timeout: the call already waited, and a broker that is away stays so.
TRANSIENT = ("COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")


def kafka_error(line: str) -> str:
    """`GroupIdNotFoundException: Group g not found.` -> `GROUP_ID_NOT_FOUND: Group g ...`."""
    name, sep, rest = line.partition(": ")
    if not name.endswith("Exception") or " " in name:
        return line
    code = _ERROR_NAMES.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "_",
                                           name.removesuffix("Exception")).upper()
    return f"{code}{sep}{rest}" if sep else code


@dataclass(frozen=True)
class Listing:
    group: str
    type: str  # one of GROUP_TYPES, "" when the broker did not say
    protocol: str  # the group's embedded protocol type ("consumer", "share", "streams", ...)
    state: str  # Kafka's names: Stable, Empty, PreparingRebalance, Reconciling, Dead, ...


@dataclass(frozen=True)
class TopicMeta:
    """One topic's partitions as the metadata reports them."""

    placements: dict[int, Placement]

    @property
    def count(self) -> int:
        return len(self.placements)


@dataclass(frozen=True)
class GroupOffsets:
    """One group's committed offsets and the lag its broker reports, per partition."""

    committed: dict[TP, int]  # a share group's: each share-partition's start offset
    # A share group's lag as its broker reports it (KIP-1226): the records not yet
    # acknowledged, which end - start offset overstates once records past the start offset
    # are acknowledged. Only the partitions it is reported for; empty for the other types.
    lag: dict[TP, int]
    # the reader's digest of the answer these were parsed from ("" when not asked for): a
    # caller that hands it back with `offsets(known=)` gets this very object again while the
    # group's answer is unchanged, instead of the answer to parse
    digest: str = ""


@dataclass(frozen=True)
class ClusterMeta:
    cluster_id: str | None
    controller: int | None
    brokers: dict[int, str]  # id -> host:port, the brokers that answer


_SHARED: dict[tuple, tuple[AdminGateway, int]] = {}
_SHARED_LOCK = threading.Lock()


def _key(settings: KafkaSettings) -> tuple:
    return settings.bootstrap, tuple(sorted(settings.client_properties.items()))


class KafkaReader:
    """The cluster's read side for one set of settings: one JVM child per process and
    cluster, however many collectors read through it (`shared`), closed with the last."""

    def __init__(self, settings: KafkaSettings, client_id: str = "groupscope-reader",
                 timeout: float = CALL_TIMEOUT_S, gateway: AdminGateway | None = None) -> None:
        self.settings = settings
        self._shared = gateway is not None
        self.gateway = gateway or AdminGateway(settings, client_id=client_id,
                                               call_timeout=timeout)
        self._closed = False
        self._pool: ThreadPoolExecutor | None = None  # read_groups' calls, made at once
        self._pool_lock = threading.Lock()

    @classmethod
    def shared(cls, settings: KafkaSettings, client_id: str = "groupscope-reader",
               timeout: float = CALL_TIMEOUT_S) -> KafkaReader:
        """A reader on this process's one JVM for these settings (started on first use)."""
        with _SHARED_LOCK:
            gateway, users = _SHARED.get(_key(settings), (None, 0))
            if gateway is None:
                gateway = AdminGateway(settings, client_id=client_id, call_timeout=timeout)
            _SHARED[_key(settings)] = (gateway, users + 1)
        return cls(settings, gateway=gateway)

    @property
    def calls(self) -> int:
        return self.gateway.calls

    def close(self) -> None:
        """Release this reader; a shared JVM stops with its last reader."""
        if self._closed:
            return
        self._closed = True
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
        if not self._shared:
            self.gateway.close()
            return
        with _SHARED_LOCK:
            key = _key(self.settings)
            gateway, users = _SHARED.get(key, (self.gateway, 1))
            if users <= 1:
                _SHARED.pop(key, None)
                gateway.close()
            else:
                _SHARED[key] = (gateway, users - 1)

    def _call(self, method: str, *args: str | int) -> dict:
        try:
            return self.gateway.call(method, *args)
        except ReaderDown:
            raise
        except ReaderError as exc:
            raise ReaderError(kafka_error(str(exc))) from None

    # ---- cluster and topics ------------------------------------------------------------

    def cluster(self) -> ClusterMeta:
        a = self._call("cluster")
        return ClusterMeta(a["cluster_id"], None if a["controller"] < 0 else a["controller"],
                           {b[0]: f"{b[1]}:{b[2]}" for b in a["brokers"]})

    def features(self) -> dict[str, int]:
        """The cluster's finalized features, name -> level (contracts.overview reads them)."""
        return {k: int(v) for k, v in self._call("features")["finalized"].items()}

    def topics(self, names: Iterable[str] = ()) -> tuple[dict[str, TopicMeta], dict[str, str]]:
        """(topic -> partitions, topic -> error) for the named topics, or every topic the
        principal may describe when none are named."""
        a = self._call("topics", SEP.join(names))
        metas = {t: TopicMeta({p[0]: Placement(None if p[1] < 0 else p[1], tuple(p[2]),
                                                tuple(p[3])) for p in parts})
                 for t, parts in a["topics"].items()}
        return metas, {t: kafka_error(e) for t, e in a["errors"].items()}

    # ---- groups --------------------------------------------------------------------------

    def list_groups(self) -> list[Listing]:
        """Every group of every type the principal may DESCRIBE, sorted by id (those of a
        broker that did not answer are missing: `listing` says so)."""
        return self.listing()[0]

    def listing(self) -> tuple[list[Listing], list[str]]:
        """(every group listed, sorted by id; the brokers' errors): a broker that did not
        answer makes the listing partial, its groups missing rather than gone."""
        a = self._call("listGroups")
        out = [Listing(g, t if t in GROUP_TYPES else "", p or "", s) for g, t, p, s in a["groups"]]
        return sorted(out, key=lambda g: g.group), [kafka_error(e) for e in a["errors"]]

    def describe(self, groups: Sequence[str], group_type: str = CONSUMER
                 ) -> dict[str, GroupDescription | str]:
        """group -> description, or the one-line reason it could not be described. Classic
        and consumer groups may be described together ("consumer": Kafka answers either
        way); "classic" asks a group known to be classic the classic way alone (faster)."""
        method = {SHARE: "describeShareGroups", STREAMS: "describeStreamsGroups",
                  CLASSIC: "describeClassicGroups"}.get(group_type, "describeConsumerGroups")
        out: dict[str, GroupDescription | str] = {}
        for i in range(0, len(groups), DESCRIBE_BATCH):
            chunk = groups[i:i + DESCRIBE_BATCH]
            answer = self._call(method, SEP.join(chunk))
            for gid, d in answer.items():
                out[gid] = kafka_error(d["error"]) if "error" in d else _description(gid, d)
        if group_type == CLASSIC:  # a group since moved to the consumer protocol, or gone
            again = [g for g, d in out.items() if isinstance(d, str)
                     and not d.startswith("GROUP_AUTHORIZATION_FAILED")]
            if again:
                out.update(self.describe(again, CONSUMER))
        return out

    def describe_group(self, group: str, group_type: str = CONSUMER) -> GroupDescription:
        """One group. One that does not exist yet is Dead with no members, as Kafka itself
        reports it; any other refusal raises ReaderError in one line."""
        answer = self.describe([group], group_type).get(group, "GROUP_ID_NOT_FOUND")
        if isinstance(answer, str):
            if "GROUP_ID_NOT_FOUND" in answer:
                return GroupDescription(group, "Dead", CLASSIC, None, ())
            raise ReaderError(f"cannot describe group {group!r}: {answer}")
        return answer

    def committed(self, groups: Sequence[str], group_type: str = CONSUMER
                  ) -> dict[str, dict[TP, int] | str]:
        """group -> committed offsets (for a share group: each share-partition's start
        offset), or the one-line reason; many groups per request."""
        return {gid: a if isinstance(a, str) else a.committed
                for gid, a in self.offsets(groups, group_type).items()}

    def offsets(self, groups: Sequence[str], group_type: str = CONSUMER,
                known: Mapping[str, GroupOffsets] | None = None) -> dict[str, GroupOffsets | str]:
        """group -> its committed offsets and, for a share group, the lag its broker
        reports per partition (`GroupOffsets`), or the one-line reason; many groups per
        request. One call gives both, so the lag and the start offset are of one moment.

        `known`: what an earlier call gave for some of the groups. A group whose answer has not
        changed since is not sent again: it maps to the very object held (most groups of a
        large cluster, most cycles: their answers were most of what a cycle parsed)."""
        out: dict[str, GroupOffsets | str] = {}
        kind = group_type if group_type in (SHARE, STREAMS) else CONSUMER
        for i in range(0, len(groups), OFFSETS_BATCH):
            chunk = groups[i:i + OFFSETS_BATCH]
            # what the caller holds, taken once: the answers are matched to exactly that
            held = {} if known is None else {g: h for g in chunk if (h := known.get(g))}
            if known is None:
                answer = self._call("committedOffsets", SEP.join(chunk), kind)
            else:
                digests = SEP.join(held[g].digest if g in held else "" for g in chunk)
                answer = self._call("committedOffsetsSince", SEP.join(chunk), digests, kind)
            for gid, a in answer.items():
                if "error" in a:
                    out[gid] = kafka_error(a["error"])
                    continue
                if "same" in a:  # only ever said of a digest we sent: one of `held`
                    out[gid] = held[gid]
                    continue
                rows = a["offsets"]
                committed = {same_tp(t, p): off for t, p, off, _lag in rows if off >= 0}
                # only share groups' answers carry a lag: the others' need no second pass
                lag = ({same_tp(t, p): n for t, p, off, n in rows if off >= 0 and n is not None}
                       if kind == SHARE else {})
                out[gid] = GroupOffsets(committed, lag, a.get("digest", ""))
        return out

    def read_groups(self, describe: dict[str, Sequence[str]],
                    offsets: dict[str, Sequence[str]],
                    known: Mapping[str, GroupOffsets] | None = None
                    ) -> dict[str, tuple[dict[str, GroupDescription | str],
                                         dict[str, GroupOffsets | str]]]:
        """type -> (descriptions of the `describe` groups, offsets of the `offsets` ones:
        committed, and a share group's reported lag), every call at once: a node that just
        died then costs a batch one wait, not one per call. `known`: as `offsets` takes it."""
        calls = [(kind, what, groups) for what, wanted in (("describe", describe),
                                                           ("offsets", offsets))
                 for kind, groups in wanted.items() if groups]

        def call(kind: str, what: str, groups: Sequence[str]) -> dict:
            return self.describe(list(groups), kind) if what == "describe" \
                else self.offsets(list(groups), kind, known)

        if len(calls) == 1:  # (one type's Empty groups: the usual batch of a large cluster)
            if self._closed:  # made here, not handed to a thread and waited for
                raise ReaderError("the Kafka reader is closed")
            kind, what, groups = calls[0]
            answers = {(kind, what): call(kind, what, groups)}
        else:
            with self._pool_lock:
                if self._closed:
                    raise ReaderError("the Kafka reader is closed")
                if self._pool is None:
                    # two kinds of call per group type, four types: never more than eight
                    self._pool = ThreadPoolExecutor(max_workers=8,
                                                    thread_name_prefix="kafka-read")
                pool = self._pool
            futures = {(kind, what): pool.submit(call, kind, what, groups)
                       for kind, what, groups in calls}
            answers = {key: f.result() for key, f in futures.items()}
        return {kind: (answers.get((kind, "describe"), {}), answers.get((kind, "offsets"), {}))
                for kind in {*describe, *offsets}}

    # ---- offsets of partitions -----------------------------------------------------------

    def list_offsets(self, specs: dict[TP, str]) -> tuple[dict[TP, int], dict[TP, str]]:
        """(offsets, errors) per partition; a spec is "latest", "earliest" or a timestamp in
        ms as a string (the first offset at or after it, -1 when there is none)."""
        offsets: dict[TP, int] = {}
        errors: dict[TP, str] = {}
        items = sorted(specs.items())
        for i in range(0, len(items), LIST_OFFSETS_BATCH):
            chunk = items[i:i + LIST_OFFSETS_BATCH]
            request = SEP.join(f"{t}{SEP}{p}{SEP}{spec}" for (t, p), spec in chunk)
            a = self._call("listOffsets", request)
            offsets.update({(t, p): off for t, p, off, _ts in a["offsets"]})
            errors.update({(t, p): kafka_error(e) for t, p, e in a["errors"]})
        return offsets, errors

    def log_offsets(self, tps: Iterable[TP]) -> tuple[dict[TP, int], dict[TP, int],
                                                      dict[TP, str]]:
        """Log-end and log-start offsets, and the partitions that failed (leaderless, or a
        leader that just died: named after a few seconds, not the call's whole deadline)."""
        ends: dict[TP, int] = {}
        starts: dict[TP, int] = {}
        errors: dict[TP, str] = {}
        wanted = sorted(set(tps))
        for i in range(0, len(wanted), LIST_OFFSETS_BATCH):
            chunk = wanted[i:i + LIST_OFFSETS_BATCH]
            a = self._call("logOffsets", SEP.join(f"{t}{SEP}{p}" for t, p in chunk))
            for t, p, end, start in a["offsets"]:
                ends[(t, p)] = end
                starts[(t, p)] = start
            errors.update({(t, p): kafka_error(e) for t, p, e in a["errors"]})
        return ends, starts, errors


def _tps(pairs: Iterable[Sequence]) -> tuple[TP, ...]:
    return tuple(sorted(same_tp(t, p) for t, p in pairs))


def _description(group: str, d: dict) -> GroupDescription:
    members = []
    for m in d["members"]:
        tasks: tuple[str, ...] = ()
        if d["type"] == STREAMS:
            tasks = tuple(f"{sub}_{p} {kind}" for kind in ("active", "standby", "warmup")
                          for sub, parts in m[kind] for p in parts)
        members.append(GroupMember(
            member_id=m["id"], client_id=m["client_id"], host=m["host"],
            assignment=_tps(m.get("assignment") or ()),
            target=None if m.get("target") is None else _tps(m["target"]),
            group_instance_id=m.get("instance_id"), tasks=tasks))
    members.sort(key=lambda m: (m.client_id, m.member_id))
    state = d["state"]
    if state == "Unknown" and not members:
        state = "Dead"
    return GroupDescription(group, state, d["type"], d["assignor"] or None, tuple(members),
                            epoch=d.get("epoch"), target_epoch=d.get("target_epoch"))
