"""An embedded Kafka cluster of N KRaft nodes on this machine, and the control of its nodes.

One node is what `EmbeddedBroker` has always been (a combined broker + controller, formatted
as a one-voter quorum). From three nodes on, nodes 1-3 form a static controller quorum (each a
broker and a controller) and any further node is a broker only; the internal topics and the
stack's own get three copies, two of which must be in sync for a write (`embedded.py`'s
replication settings, backend/kafka/topics.py). Every node has its own client port (node
1's is `port`, the others the next free ones), controller port and data directory
`<data_dir>/node-<id>`. What other processes read of the cluster (`cluster.json`) is written
here and read on the client side (backend/kafka/clusterfile.py).

The `groupscope broker` process owns the nodes' JVMs. Other processes (the supervisor's
control API, hence `groupscope ctl broker` and the dashboard's buttons) ask it to kill, stop or
start a node through a mailbox in the data directory: a request file, answered by a reply file
once done. A file mailbox, not another HTTP server: the only callers run on this machine as
the same user, the data directory's permissions are the access control, and the cluster
process needs nothing but its own loop to serve it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

from backend.broker.embedded import (
    BrokerStartError,
    EmbeddedBroker,
    formatted_cluster_id,
    random_cluster_id,
)
from backend.contracts.control import BROKER_ACTIONS, NODE_REQUEST_TIMEOUT_S, BrokerNode
from backend.errors import one_line
from backend.kafka.clusterfile import CLUSTER_FILE, read_cluster
from backend.kafka.jars import KAFKA_VERSION
from backend.kafka.settings import KafkaSettings
from backend.netutil import PortBusyError, free_port, wait_until
from backend.proc import STOP_BUDGET_S, StopSignals

MAX_BROKERS = 9
QUORUM = 3  # controllers of a cluster of three nodes or more
MAILBOX = "requests"


class ClusterError(BrokerStartError):
    """A cluster that cannot start or a node request that cannot be done: one line."""


class EmbeddedCluster:
    """`brokers` KRaft nodes started together; `start()` returns once every broker is
    registered with the controller quorum (a real DescribeCluster lists them all)."""

    def __init__(self, data_dir: Path, brokers: int = 1, port: int | None = None,
                 host: str = "127.0.0.1", heap: str = "512m", room_address: str | None = None,
                 room_port: int | None = None) -> None:
        if not 1 <= brokers <= MAX_BROKERS:
            raise ClusterError(f"--brokers must be between 1 and {MAX_BROKERS}, not {brokers}")
        if room_address and brokers > 1:
            raise ClusterError("a workshop room runs one broker: leave out --brokers with "
                               "--room")
        self.data_dir = Path(data_dir)
        self.host = host
        self.size = brokers
        self._room = (room_address, room_port)
        self._lock = threading.RLock()
        self.nodes = self._plan(port, heap)

    # ---- the plan: ports, voters, cluster id -------------------------------------------

    def _plan(self, port: int | None, heap: str) -> dict[int, EmbeddedBroker]:
        """Nodes with their ports: kept from an earlier start of this data directory (a
        node's ports are part of its quorum and its advertised address), else new ones."""
        if self.size == 1:  # the single combined node groupscope has always run
            room_address, room_port = self._room
            node = EmbeddedBroker(self.data_dir, port=port or free_port(self.host),
                                  host=self.host, heap=heap, room_address=room_address,
                                  room_port=room_port)
            return {1: node}
        saved = self._saved_ports()
        ids = range(1, self.size + 1)
        taken: set[int] = set()

        def pick(wanted: int | None) -> int:
            chosen = wanted or free_port(self.host)
            while chosen in taken:
                chosen = free_port(self.host)
            taken.add(chosen)
            return chosen

        ports = {i: pick((port if i == 1 else None) or saved.get(i, {}).get("port"))
                 for i in ids}
        voters = {i: pick(saved.get(i, {}).get("controller_port"))
                  for i in ids if i <= QUORUM}
        cluster_id = self._cluster_id()
        return {i: EmbeddedBroker(self.node_dir(i), port=ports[i], host=self.host,
                                  node_id=i, heap=heap, voters=voters, cluster_id=cluster_id,
                                  cluster_size=self.size)
                for i in ids}

    def node_dir(self, node_id: int) -> Path:
        return self.data_dir if self.size == 1 else self.data_dir / f"node-{node_id}"

    def _saved_ports(self) -> dict[int, dict[str, int]]:
        path = self.data_dir / CLUSTER_FILE
        try:
            saved = json.loads(path.read_text())
        except (OSError, ValueError):
            return {}
        if saved.get("brokers") != self.size:
            return {}
        return {n["id"]: n for n in saved.get("nodes", [])}

    def _cluster_id(self) -> str:
        """The id every node's storage shares: the one they were formatted with, or new."""
        found = {i: formatted_cluster_id(self.node_dir(i)) for i in range(1, self.size + 1)}
        ids = {c for c in found.values() if c is not None}
        if len(ids) > 1:
            listing = ", ".join(f"node {i}: {c}" for i, c in found.items() if c)
            raise ClusterError(
                f"the nodes' data directories under {self.data_dir} were formatted for "
                f"different clusters ({listing}): remove {self.data_dir} or use another "
                "--data-dir")
        return ids.pop() if ids else random_cluster_id()

    # ---- connecting --------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{self.host}:{n.port}" for n in self.nodes.values())

    @property
    def settings(self) -> KafkaSettings:
        return KafkaSettings(bootstrap=self.bootstrap)

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self, timeout: float = 90.0) -> EmbeddedCluster:
        """Start every node at once (a quorum elects a leader only once most of its voters
        run), then wait until the cluster lists all of them. On any failure the nodes
        already started are stopped and the first error is raised, in one line."""
        failures: list[BaseException] = []
        configs: dict[int, Path] = {}

        def prepare(node_id: int, node: EmbeddedBroker) -> None:
            try:
                configs[node_id] = node.prepare()  # the formatting JVMs run side by side
            except BaseException as exc:  # reported below, after every one returned
                failures.append(exc)

        threads = [threading.Thread(target=prepare, args=item, daemon=True)
                   for item in self.nodes.items()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            if failures:  # one line naming the node: its busy port, its failed format
                if isinstance(failures[0], PortBusyError):
                    raise failures[0]
                raise ClusterError(one_line(failures[0])) from failures[0]
            for i, node in self.nodes.items():  # spawned from this thread: see launch()
                node.launch(configs[i])
            self._write_cluster_file()
            self._wait_all_registered(timeout)
        except BaseException:
            self.stop()
            raise
        self._write_cluster_file()
        return self

    def _wait_all_registered(self, timeout: float) -> None:
        settings = self.settings

        def dead() -> None:
            for i, n in self.nodes.items():
                if not n.running():
                    raise ClusterError(f"Kafka node {i} exited during start-up; last lines "
                                       f"of its log:\n{n._service.tail()}")

        def registered() -> bool:
            return settings.check_reachable(timeout=2.0) >= self.size

        try:
            wait_until(registered, timeout, 0.3, what=f"{self.size} Kafka brokers registered",
                       abort=dead)
        except TimeoutError:
            raise ClusterError(
                f"the {self.size} Kafka nodes did not all register within {timeout:.0f}s "
                f"(logs in {self.data_dir}/node-*/broker.log)") from None

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every node at once (SIGTERM, SIGKILL if one hangs)."""
        threads = [threading.Thread(target=n.stop, args=(timeout,), daemon=True)
                   for n in self.nodes.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout + 5)
        (self.data_dir / CLUSTER_FILE).unlink(missing_ok=True)

    # ---- one node ----------------------------------------------------------------------

    def node(self, node_id: int) -> EmbeddedBroker:
        if node_id not in self.nodes:
            raise ClusterError(f"no Kafka node {node_id}: this cluster has nodes "
                               f"{', '.join(map(str, self.nodes))}")
        return self.nodes[node_id]

    def kill(self, node_id: int) -> BrokerNode:
        """SIGKILL one node: a crash, as a power cut would leave it."""
        with self._lock:
            self.node(node_id).kill()
            self._write_cluster_file()
            return self.info(node_id)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> BrokerNode:
        """SIGTERM one node: a controlled shutdown moves its leaderships away first."""
        with self._lock:
            self.node(node_id).stop(timeout)
            self._write_cluster_file()
            return self.info(node_id)

    def start_node(self, node_id: int, timeout: float = NODE_REQUEST_TIMEOUT_S - 5,
                   wait: bool = True) -> BrokerNode:
        """Start a stopped node again: same config, ports and data; unless `wait` is False,
        answered once it answers (it then catches up and rejoins the in-sync replicas on its
        own). A node still silent at `timeout` is left running, never stopped: after a kill it
        recovers its logs first, which on a loaded laptop can outlast the request, and the
        presenter who pressed Start wants it back, not undone. One that exits fails the call.
        From the caller's thread, which must outlive the node."""
        with self._lock:
            node = self.node(node_id)
            if node.running():
                raise ClusterError(f"Kafka node {node_id} is already running")
            node.launch(node.prepare())
            if wait:
                node.wait_ready(timeout, give_up=False)
            self._write_cluster_file()
            return self.info(node_id)

    def node_ids(self) -> list[int]:
        return list(self.nodes)

    def info(self, node_id: int) -> BrokerNode:
        n = self.node(node_id)
        alive = n.running()
        return BrokerNode(id=node_id, port=n.port, controller_port=n.controller_port,
                        pid=n.process.pid if alive and n.process else None, alive=alive,
                        controller=n.is_controller)

    def infos(self) -> list[BrokerNode]:
        return [self.info(i) for i in self.nodes]

    def quorum_leader(self) -> int | None:
        return quorum_leader([self.node_dir(i) for i, n in self.nodes.items()
                              if n.is_controller])

    def _write_cluster_file(self) -> None:
        """What other processes read: the nodes, their ports and pids, and our own pid."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        data = {"brokers": self.size, "pid": os.getpid(), "bootstrap": self.bootstrap,
                "nodes": [i.model_dump() for i in self.infos()]}
        tmp = self.data_dir / f".{CLUSTER_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.data_dir / CLUSTER_FILE)

    # ---- the mailbox: requests from other processes -----------------------------------

    def serve_requests(self) -> None:
        """Answer every request waiting in the mailbox (called from the foreground loop)."""
        box = self.data_dir / MAILBOX
        for request in sorted(box.glob("*.json")) if box.is_dir() else []:
            reply = request.with_suffix(".reply")
            try:
                ask = json.loads(request.read_text())
                action, node_id = ask["action"], int(ask["node"])
                if action not in BROKER_ACTIONS:
                    raise ClusterError(f"unknown action {action!r}; one of "
                                       f"{', '.join(BROKER_ACTIONS)}")
                do = {"kill": self.kill, "stop": self.stop_node, "start": self.start_node}
                answer = {"ok": True, "node": do[action](node_id).model_dump()}
            except (ClusterError, BrokerStartError) as exc:
                answer = {"ok": False, "error": one_line(exc)}
            except (OSError, ValueError, KeyError, TypeError) as exc:
                answer = {"ok": False, "error": f"malformed request: {exc}"}
            tmp = reply.with_suffix(".tmp")
            tmp.write_text(json.dumps(answer))
            tmp.replace(reply)
            request.unlink(missing_ok=True)

    def run_foreground(self) -> int:
        """`groupscope broker [--brokers N]`: start, report, answer node requests, stop
        cleanly on Ctrl-C or SIGTERM. A node that dies does not end it (killing one is the
        point of a demo); every node dying does, like a single broker's death always has."""
        starting = True

        def interrupt() -> None:
            if starting:  # out of a start-up that may take a minute; start() cleans up
                raise KeyboardInterrupt

        with StopSignals(on_stop=interrupt) as signals:
            try:
                self.start()
            except KeyboardInterrupt:
                return 0
            starting = False
            (self.data_dir / MAILBOX).mkdir(exist_ok=True)
            ports = ", ".join(f"node {i} on {self.host}:{n.port}" for i, n in self.nodes.items())
            sys.stderr.write(f"Kafka {KAFKA_VERSION} ready: {ports} (data {self.data_dir})\n")

            def serving() -> bool:
                self.serve_requests()
                return self.size > 1 or self.nodes[1].running()

            died = not signals.wait(alive=serving, interval=0.25)
            self.stop(STOP_BUDGET_S)
        return 1 if died else 0


def request(data_dir: Path, action: str, node_id: int,
            timeout: float = NODE_REQUEST_TIMEOUT_S) -> BrokerNode:
    """Ask the `groupscope broker` process that runs the cluster in `data_dir` to kill, stop
    or start a node, and wait for its answer. ClusterError in one line otherwise."""
    data_dir = Path(data_dir)
    cluster_nodes(data_dir)  # refuses when no cluster runs there
    box = data_dir / MAILBOX
    name = uuid.uuid4().hex
    tmp = box / f"{name}.tmp"
    tmp.write_text(json.dumps({"action": action, "node": node_id}))
    tmp.replace(box / f"{name}.json")
    reply = box / f"{name}.reply"
    deadline = time.monotonic() + timeout
    while not reply.exists():
        if time.monotonic() > deadline:
            (box / f"{name}.json").unlink(missing_ok=True)
            raise ClusterError(f"the Kafka cluster did not answer '{action} node {node_id}' "
                               f"within {timeout:.0f}s")
        time.sleep(0.05)
    answer = json.loads(reply.read_text())
    reply.unlink(missing_ok=True)
    if not answer.get("ok"):
        raise ClusterError(answer.get("error", "the request failed"))
    return BrokerNode.model_validate(answer["node"])


def quorum_leader(voter_dirs: list[Path]) -> int | None:
    """The controller quorum's leader, from the voters' own quorum-state files: each voter
    records the leader and epoch it knows, and the highest epoch is the newest."""
    best: tuple[int, int] | None = None
    for node_dir in voter_dirs:
        state = Path(node_dir) / "logs" / "__cluster_metadata-0" / "quorum-state"
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            continue
        epoch, leader = int(data.get("leaderEpoch", -1)), int(data.get("leaderId", -1))
        if leader >= 0 and (best is None or epoch > best[0]):
            best = (epoch, leader)
    return best[1] if best else None


def cluster_nodes(data_dir: Path) -> tuple[list[BrokerNode], int | None]:
    """The nodes of the cluster running from `data_dir` and its quorum leader, for another
    process (the supervisor); ClusterError when none runs there."""
    data = read_cluster(data_dir)
    if data is None:
        raise ClusterError(f"this stack runs no Kafka of its own (no `groupscope broker` "
                           f"runs from {data_dir}); an external cluster is not ours to stop")
    nodes = [BrokerNode.model_validate(n) for n in data.get("nodes", [])]
    size = int(data.get("brokers", 1))
    dirs = [Path(data_dir) if size == 1 else Path(data_dir) / f"node-{n.id}"
            for n in nodes if n.controller]
    return nodes, quorum_leader(dirs)


class MailboxCluster:
    """The nodes of the cluster a `groupscope broker` process runs from `data_dir`, for a
    process that is not it (`groupscope chaos --broker-kills`): the same calls as an
    EmbeddedCluster's, each a request to that process."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        cluster_nodes(self.data_dir)  # refuses now when no cluster runs there
        self._starting: list[threading.Thread] = []

    def node_ids(self) -> list[int]:
        return [n.id for n in cluster_nodes(self.data_dir)[0]]

    def kill(self, node_id: int) -> BrokerNode:
        return request(self.data_dir, "kill", node_id)

    def start_node(self, node_id: int, wait: bool = True) -> BrokerNode | None:
        """The cluster process answers once the node is up, which takes seconds; without
        `wait` the request is made from a thread of its own and this returns at once (a chaos
        run's plan goes on meanwhile, as with an EmbeddedCluster), a refusal only logged."""
        if wait:
            return request(self.data_dir, "start", node_id)

        def start() -> None:
            try:
                request(self.data_dir, "start", node_id)
            except ClusterError as exc:
                sys.stderr.write(f"groupscope: starting Kafka node {node_id}: {exc}\n")

        thread = threading.Thread(target=start, name=f"start-node-{node_id}", daemon=True)
        thread.start()
        self._starting = [t for t in self._starting if t.is_alive()] + [thread]
        return None

    def started(self, timeout: float = NODE_REQUEST_TIMEOUT_S) -> None:
        """Wait for the starts asked without waiting (their answers, or their timeouts)."""
        deadline = time.monotonic() + timeout
        for thread in self._starting:
            thread.join(max(0.0, deadline - time.monotonic()))
