"""librdkafka's admin API only where groupscope writes or sets a topic up; every read goes
through the Kafka reader (Kafka's Java Admin, `backend/kafka/javaadmin`).

librdkafka's admin aborts its whole process when a coordinator's connection drops mid-call,
so no watcher, page or exporter may read a cluster with it. import-linter cannot say this:
its forbidden contracts take only an external package's top level (`confluent_kafka`, which
producers and consumers need everywhere), never `confluent_kafka.admin`. So this pure-AST
check is the contract: who imports `confluent_kafka.admin`, and who makes an AdminClient
through `backend.kafka.clients.quiet_admin`, each with the reason it may.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("backend", "dashboard")

# module -> why it may import confluent_kafka.admin itself
ADMIN_IMPORTERS = {
    "backend/kafka/clients.py": "quiet_admin: the one way the modules below make a client",
    "backend/kafka/topics.py": "topic set-up: create, add partitions, set configs",
    "backend/kafka/share.py": "a share group's set-up: its auto-offset-reset config",
    "backend/kafka/settings.py": "the connection check a command makes before it starts: one "
                                 "metadata request, no group coordinator",
    "backend/kafka/javaadmin/classdata.py": "`make jars` sets up the topic it trains the "
                                            "reader's class-data archive on",
}
# module -> why it may make an AdminClient through quiet_admin
QUIET_ADMIN_USERS = {
    "backend/kafka/topics.py": "topic set-up",
    "backend/kafka/share.py": "a share group's set-up",
    "backend/offsets/reset.py": "a write: a classic or consumer group's offsets altered",
    "backend/kafka/javaadmin/gateway.py": "refuses bad client settings in librdkafka's words "
                                          "before the reader starts; it sends no request",
}


def _python_files() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]


def _imports_admin(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "confluent_kafka.admin"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("confluent_kafka.admin")
                                                for a in node.names):
            return True
    return False


def _uses_quiet_admin(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ImportFrom) and node.module == "backend.kafka.clients"
               and any(a.name == "quiet_admin" for a in node.names) for node in ast.walk(tree))


def _trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(REPO)): ast.parse(p.read_text(), str(p)) for p in _python_files()}


def test_only_writes_and_set_up_import_librdkafkas_admin() -> None:
    found = {path for path, tree in _trees().items() if _imports_admin(tree)}
    assert found <= set(ADMIN_IMPORTERS), (
        f"{sorted(found - set(ADMIN_IMPORTERS))} import confluent_kafka.admin: read through "
        f"backend.kafka.javaadmin.reader.KafkaReader, or add the module here with the write "
        f"or set-up it does")
    assert set(ADMIN_IMPORTERS) <= found, f"stale entries: {sorted(set(ADMIN_IMPORTERS) - found)}"


def test_only_writes_and_set_up_make_an_admin_client() -> None:
    found = {path for path, tree in _trees().items() if _uses_quiet_admin(tree)}
    assert found == set(QUIET_ADMIN_USERS), (
        f"unexpected: {sorted(found - set(QUIET_ADMIN_USERS))}, "
        f"stale: {sorted(set(QUIET_ADMIN_USERS) - found)}")


def test_the_check_sees_an_import_it_must_refuse() -> None:
    """The check itself can fail: a read module importing the admin API is caught."""
    bad = ast.parse("from confluent_kafka.admin import AdminClient\n")
    also_bad = ast.parse("import confluent_kafka.admin as a\n")
    fine = ast.parse("from confluent_kafka import Consumer\n")
    assert _imports_admin(bad) and _imports_admin(also_bad) and not _imports_admin(fine)
