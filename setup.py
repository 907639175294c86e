"""The wheel carries groupscope's two Java programs compiled, so an installed groupscope needs a
Java runtime only, not a JDK (pyproject.toml holds everything else about the package).

`make wheel` (pip's `--no-build-isolation`, in the environment `make setup` made) builds it:
the Kafka reader and the offsets writer are compiled there as on first use
(`gateway.compile_jar`, or taken from that environment's earlier build) and copied into
`prebuilt/` beside their sources, with each source's digest, which `compile_jar` checks before
it would ever look for `javac`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithJava(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            # `pip install -e .` (`make setup`): the programs compile on first use, from the
            # sources in the clone; building them here would need the project's dependencies
            # inside pip's isolated build environment, which has setuptools alone
            return
        sys.path.insert(0, str(ROOT))
        from backend.kafka.javaadmin import gateway
        from backend.offsets import writer

        for source, built in ((gateway.SOURCE, gateway.compiled_classes()),
                              (writer.SOURCE, writer.compiled_writer())):
            package = source.parent.relative_to(ROOT)
            target = Path(self.build_lib) / package / gateway.PREBUILT
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(built, target / built.name)
            (target / f"{built.name}.sha256").write_text(gateway.source_digest(source) + "\n")


setup(cmdclass={"build_py": BuildWithJava})
