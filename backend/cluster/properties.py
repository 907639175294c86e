"""Read a standard librdkafka / Java `client.properties` file, failing on the exact bad line."""

from __future__ import annotations

import re
from pathlib import Path

# Keys whose values must never reach a log, an error or a page.
SECRET_KEY = re.compile(r"(password|secret|token|sasl\.jaas\.config|private\.key|key\.pem)", re.I)
_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


class KafkaConfigError(ValueError):
    """A client.properties file that cannot be used, with the line that is wrong."""


def parse_properties(text: str, source: str = "<config>") -> dict[str, str]:
    config: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not match or not _KEY.match(match.group(1)):
            head = re.split(r"[\s=:]", line, maxsplit=1)[0]
            shown = f"{head} ***" if SECRET_KEY.search(line) else line
            raise KafkaConfigError(
                f"{source}:{number}: expected 'key=value', got {shown!r}"
            )
        key, value = match.group(1), match.group(2).strip()
        if key in config:
            raise KafkaConfigError(f"{source}:{number}: '{key}' is set twice")
        config[key] = value
    return config


def load_properties(path: str | Path) -> dict[str, str]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise KafkaConfigError(f"cannot read Kafka config file {p}: {exc.strerror}") from exc
    return parse_properties(text, source=str(p))


def redact(config: dict[str, str]) -> dict[str, str]:
    """A copy that is safe to print."""
    return {k: ("***" if SECRET_KEY.search(k) else v) for k, v in config.items()}
