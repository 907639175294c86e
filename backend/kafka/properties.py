"""Read a standard librdkafka / Java `client.properties` file, failing on the exact bad line."""

from __future__ import annotations

import re
from pathlib import Path

# Keys whose values must never reach a log, an error or a page.
SECRET_KEY = re.compile(r"(password|secret|token|sasl\.jaas\.config|private\.key|key\.pem|"
                        r"keystore\.key\b)", re.I)
_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")
# Keys naming one file or directory (librdkafka's, and the Java client's store locations).
# A relative one is taken from the properties file's own directory, as a user who keeps
# client.properties beside its ca.pem expects, whatever directory groupscope runs from.
PATH_KEYS = frozenset({
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.crl.location",
    "ssl.keystore.location", "ssl.truststore.location", "ssl.engine.location",
    "sasl.kerberos.keytab",
})
# Values of those keys that are not paths (librdkafka: probe the system's CA locations).
_NOT_A_PATH = frozenset({"probe"})


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
    """The file's settings, with relative file paths made absolute against its directory."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise KafkaConfigError(f"cannot read Kafka config file {p}: {exc.strerror}") from exc
    return resolve_paths(parse_properties(text, source=str(p)), p.resolve().parent, str(p))


def resolve_paths(config: dict[str, str], base: Path, source: str = "<config>"
                  ) -> dict[str, str]:
    """A copy with every PATH_KEYS value absolute (relative ones joined to `base`) and checked
    to exist, so a wrong path is named here, with its key, rather than by librdkafka later as
    an unexplained failure to create a client."""
    out = dict(config)
    for key in PATH_KEYS & config.keys():
        value = config[key]
        if not value or value in _NOT_A_PATH:
            continue
        resolved = base / Path(value).expanduser()  # an absolute value stays as it is
        if not resolved.exists():
            raise KafkaConfigError(f"{source}: {key}={value}: no such file ({resolved})")
        out[key] = str(resolved)
    return out


def redact(config: dict[str, str]) -> dict[str, str]:
    """A copy that is safe to print."""
    return {k: ("***" if SECRET_KEY.search(k) else v) for k, v in config.items()}
