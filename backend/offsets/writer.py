"""The writes confluent-kafka does not wrap, through Kafka's own Admin in a one-shot JVM.

A share group's start offsets (`alterShareGroupOffsets`) and deleting a consumer group's
committed offsets (`deleteConsumerGroupOffsets`). `java/OffsetsWriter.java` runs for one
request and exits: the reading layer's long-lived JVM never writes, and no writing process
exists unless `groupscope offsets ... --execute` asked for one. Its class is compiled once
per source and Java, like the reader's (kafka.javaadmin.gateway.compile_jar); the client's
properties go in on standard input, never in argv or the environment.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from backend.classdata import java
from backend.kafka.jars import client_jars
from backend.kafka.javaadmin.gateway import compile_jar
from backend.kafka.javaadmin.javaconfig import java_properties, properties_text
from backend.kafka.settings import KafkaSettings
from backend.offsets.plan import TP, Plan

SOURCE = Path(__file__).with_name("java") / "OffsetsWriter.java"
MAIN_CLASS = "groupscope.write.OffsetsWriter"
JAR = "OffsetsWriter.jar"
RUN_TIMEOUT_S = 90.0  # the JVM's start, the client's connection and its 30 s per request
_FLAGS = ("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
          "-Djava.awt.headless=true", "-Xlog:all=off")


def compiled_writer(quiet: bool = True) -> Path:
    """The writer's jar, compiled once per source and Java (`make jars` does it ahead)."""
    return compile_jar(SOURCE, JAR, "kafka-offsets-writer", client_jars(),
                       "groupscope's offsets writer", quiet)


class WriterError(RuntimeError):
    """The whole request failed (one line, never a secret)."""


def _run(settings: KafkaSettings, head: str, rows: list[str]) -> dict[TP, str | None]:
    """One request; per partition None (taken) or why not."""
    runtime = java()
    if runtime is None:
        raise WriterError("java not found: groupscope writes these offsets with Java 17")
    jars = client_jars()
    jar = compiled_writer()
    props = properties_text(java_properties(settings, "groupscope-offsets"))
    stdin = f"{props}--end--\n{head}\n" + "".join(f"{r}\n" for r in rows)
    try:
        done = subprocess.run([str(runtime), *_FLAGS, "-cp",
                               os.pathsep.join(map(str, [jar, *jars])), MAIN_CLASS],
                              input=stdin, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, start_new_session=True)
    except subprocess.TimeoutExpired:
        raise WriterError(f"Kafka's Admin did not answer within {RUN_TIMEOUT_S:.0f} s") from None
    out: dict[TP, str | None] = {}
    for line in done.stdout.splitlines():
        if line.startswith("ERROR "):
            raise WriterError(settings.scrub(line[6:]))
        parts = line.split("\t")
        if parts[0] == "OK" and len(parts) == 3:
            out[(parts[1], int(parts[2]))] = None
        elif parts[0] == "ERR" and len(parts) >= 4:
            out[(parts[1], int(parts[2]))] = settings.scrub(parts[3])
    if "DONE" not in done.stdout.splitlines():
        first = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
        raise WriterError(settings.scrub(f"the offsets writer failed: {first}"))
    return out


def _refused(answers: dict[TP, str | None], plan: Plan) -> dict[TP, str]:
    """The plan's changed partitions the broker did not take, with why."""
    return {r.tp: answers.get(r.tp) or "no answer for this partition"
            for r in plan.changed if answers.get(r.tp, "") is not None}


def alter_share(settings: KafkaSettings, plan: Plan) -> dict[TP, str]:
    """Set a share group's start offsets to the plan's; the partitions refused, with why."""
    rows = [f"{r.topic}\t{r.partition}\t{r.new}" for r in plan.changed if r.new is not None]
    try:
        return _refused(_run(settings, f"alter-share {plan.group}", rows), plan)
    except WriterError as exc:
        return {r.tp: str(exc) for r in plan.changed}


def delete_consumer(settings: KafkaSettings, plan: Plan) -> dict[TP, str]:
    """Delete a consumer group's committed offsets of the plan's partitions."""
    rows = [f"{r.topic}\t{r.partition}" for r in plan.changed]
    try:
        return _refused(_run(settings, f"delete-consumer {plan.group}", rows), plan)
    except WriterError as exc:
        return {r.tp: str(exc) for r in plan.changed}
