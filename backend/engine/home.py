"""What every Spark process of the engine starts from: pyspark's directory (its jars and
scripts), and the error a Spark process raises when it does not start.

The Connect server (server.py), the standalone master and workers it may drive
(standalone.py) and the class-data archive keyed to pyspark's jars (classdata.py) all need
them; kept here, below all three, so none of them imports the server for them.
"""

from __future__ import annotations

from pathlib import Path

from backend.proc import ServiceStartError


class EngineStartError(ServiceStartError):
    pass


def spark_home() -> Path:
    """pyspark's directory, found without importing it (an import a waiting process would
    keep in memory: see bench/README.md, "The Spark engine's memory")."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise EngineStartError("pyspark is not installed in this environment")
    return Path(next(iter(spec.submodule_search_locations)))
