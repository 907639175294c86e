"""The alert rules file: its format, its defaults and its validation, written once.

`groupscope exporter --alerts FILE` and `groupscope watch --alerts FILE` read a TOML file of
`[[rule]]` tables (what to alert on) and `[[sink]]` tables (where to send it). Every fact about
that format (the kinds, their keys and defaults, the limits) lives in this module; the engine
evaluates the models it returns, and `assets/alerts.example.toml` shows each kind.

The file is validated with pydantic models that forbid unknown keys, so a typo (`abov = 300`)
is an error rather than a silently ignored setting. A refusal is one line naming the file, the
line and what to fix: tomllib's errors carry the line; for a model error we find the line of
the offending key (or of the Nth `[[rule]]` header) with a small scan of the text, as tomllib
keeps no positions.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from backend.cli_common import DURATION_HINT, UserError, parse_duration
from backend.contracts.overview import ERR, HEALTH_WORST_FIRST, OK, REWIND, STALL, STOP, WARN


class AlertRulesError(UserError):
    """The alerts file cannot be used; the message is one line: `FILE:LINE: what to fix`."""


# ---- the format's facts --------------------------------------------------------------------

# kind -> what it fires on (the example file and the error messages use these words)
KINDS: dict[str, str] = {
    "health": "the group's health is one of `health` (default: anything but OK)",
    "lag_seconds": "the group's oldest unconsumed message is more than `above` seconds old",
    "lag_messages": "the group's total lag is more than `above` messages",
    "empty_lag": "the group is Empty (no members) yet has lag: nobody consumes it",
    "rebalances": "the group rebalanced more than `more_than` times `within` (default 10m)",
}
# how long a condition must hold before it fires (`for`); a rule resolves after its good
# condition held for `resolve_after`, by default the same duration (rebalances: `within`)
DEFAULT_FOR: dict[str, str] = {
    "health": "1m",
    "lag_seconds": "5m",
    "lag_messages": "5m",
    "empty_lag": "5m",
    "rebalances": "0s",
}
DEFAULT_HEALTH: tuple[str, ...] = (WARN, STALL, STOP, REWIND, ERR)
RESOLVE_FRACTION = 0.8  # a threshold resolves at or below 80 % of `above` unless told
DEFAULT_REBALANCE_WINDOW = "10m"
MAX_REBALANCE_WINDOW = "1h"
MAX_MORE_THAN = 1000  # rebalances counted per group and window: bounds the engine's memory
MAX_DURATION = "1d"  # longer is a typo more often than a wish

def _duration(value: Any) -> int:
    if not isinstance(value, str):
        raise ValueError(f"write {DURATION_HINT}, in quotes")
    ms = parse_duration(value)
    if ms > parse_duration(MAX_DURATION):
        raise ValueError(f"at most {MAX_DURATION}")
    return ms


Duration = Annotated[int, BeforeValidator(_duration)]  # milliseconds
Pattern = Annotated[str, Field(min_length=1, max_length=255)]


# ---- rules ---------------------------------------------------------------------------------

class BaseRule(BaseModel):
    """What every kind shares: a name, which groups, how long before firing and resolving."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str  # each kind narrows it to its Literal, the tag pydantic dispatches on
    name: str | None = Field(default=None, min_length=1, max_length=100)  # default: default_name()
    groups: tuple[Pattern, ...] = Field(default=("*",), min_length=1)  # fnmatch globs
    exclude: tuple[Pattern, ...] = ()
    for_ms: Duration = Field(alias="for")  # default: its kind's DEFAULT_FOR (_default_for)
    resolve_after_ms: Duration | None = Field(default=None, alias="resolve_after")

    @model_validator(mode="before")
    @classmethod
    def _default_for(cls, data: Any) -> Any:
        """A rule without `for` takes its kind's from DEFAULT_FOR: the defaults stay in that
        one table of the format's facts instead of a field default in every kind."""
        kind = data.get("kind") if isinstance(data, dict) else None
        if isinstance(kind, str) and kind in DEFAULT_FOR and "for" not in data:
            return {**data, "for": DEFAULT_FOR[kind]}
        return data

    def applies_to(self, group: str) -> bool:
        return (any(fnmatchcase(group, p) for p in self.groups)
                and not any(fnmatchcase(group, p) for p in self.exclude))

    @property
    def resolve_ms(self) -> int:
        return self.for_ms if self.resolve_after_ms is None else self.resolve_after_ms

    @property
    def label(self) -> str:
        return self.name or self.kind


class HealthRule(BaseRule):
    kind: Literal["health"]
    health: tuple[str, ...] = Field(default=DEFAULT_HEALTH, min_length=1)

    @field_validator("health")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        allowed = [h for h in HEALTH_WORST_FIRST if h != OK]
        for h in value:
            if h not in allowed:
                raise ValueError(f"{h!r} is not a health state to alert on; "
                                 f"choose from {', '.join(allowed)}")
        return value


class ThresholdRule(BaseRule):
    """Fires above `above`; resolves at or below `resolve_below` (hysteresis: no flapping)."""

    above: float = Field(ge=0, allow_inf_nan=False)
    resolve_below: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    @field_validator("resolve_below")
    @classmethod
    def _under_above(cls, value: float | None, info: ValidationInfo) -> float | None:
        above = info.data.get("above")
        if value is not None and above is not None and value > above:
            raise ValueError(f"must be at most `above` ({above:g})")
        return value

    @property
    def resolve_at(self) -> float:
        return self.above * RESOLVE_FRACTION if self.resolve_below is None else self.resolve_below


class LagSecondsRule(ThresholdRule):
    kind: Literal["lag_seconds"]


class LagMessagesRule(ThresholdRule):
    kind: Literal["lag_messages"]


class EmptyLagRule(BaseRule):
    kind: Literal["empty_lag"]


class RebalancesRule(BaseRule):
    kind: Literal["rebalances"]
    more_than: int = Field(ge=0, le=MAX_MORE_THAN)
    within_ms: Duration = Field(default=parse_duration(DEFAULT_REBALANCE_WINDOW), alias="within")

    @field_validator("within_ms")
    @classmethod
    def _window(cls, value: int) -> int:
        if not 0 < value <= parse_duration(MAX_REBALANCE_WINDOW):
            raise ValueError(f"must be above 0s and at most {MAX_REBALANCE_WINDOW}")
        return value

    @property
    def resolve_ms(self) -> int:
        # a rebalance storm counts over a window; quiet for a whole window before it resolves
        return self.within_ms if self.resolve_after_ms is None else self.resolve_after_ms


Rule = Annotated[
    HealthRule | LagSecondsRule | LagMessagesRule | EmptyLagRule | RebalancesRule,
    Field(discriminator="kind"),
]
RULE_MODELS: dict[str, type[BaseRule]] = {
    "health": HealthRule,
    "lag_seconds": LagSecondsRule,
    "lag_messages": LagMessagesRule,
    "empty_lag": EmptyLagRule,
    "rebalances": RebalancesRule,
}


def default_name(kind: str, index: int) -> str:
    """An unnamed rule's name in alerts: its kind and its position in the file."""
    return f"{kind} rule #{index + 1}"


# ---- sinks ---------------------------------------------------------------------------------

def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # never echo the value: a webhook URL is a secret
        raise ValueError("must be an http:// or https:// URL with a host")


class LogSinkConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["log"]


class WebhookSinkConfig(BaseModel):
    """A Slack-compatible incoming webhook. The URL is a secret: SecretStr keeps it out of
    reprs, and `url_env` lets the file name an environment variable instead of holding it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    type: Literal["webhook"]
    url: SecretStr | None = None
    url_env: str | None = Field(default=None, min_length=1)

    @field_validator("url")
    @classmethod
    def _url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            _check_url(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _one_source(self) -> WebhookSinkConfig:
        if (self.url is None) == (self.url_env is None):
            raise ValueError("give exactly one of `url` or `url_env`")
        return self


Sink = Annotated[LogSinkConfig | WebhookSinkConfig, Field(discriminator="type")]


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rule: tuple[Rule, ...] = Field(min_length=1)
    sink: tuple[Sink, ...] = ()


@dataclass(frozen=True)
class AlertRules:
    """A validated rules file: rules in file order, sinks with their URLs resolved."""

    source: str
    rules: tuple[BaseRule, ...]
    sinks: tuple[LogSinkConfig | WebhookSinkConfig, ...]


# ---- reading -------------------------------------------------------------------------------

def read_rules(path: str | Path, environ: Mapping[str, str] | None = None) -> AlertRules:
    """Read and validate an alerts file; AlertRulesError (one line) when it cannot be used."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise AlertRulesError(f"{path}: cannot read the alerts file "
                              f"({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError:
        raise AlertRulesError(f"{path}: the alerts file is not UTF-8 text") from None
    return parse_rules(text, str(path), environ)


def parse_rules(text: str, source: str = "<alerts>",
                environ: Mapping[str, str] | None = None) -> AlertRules:
    """Validate the text of an alerts file; `source` names it in error messages."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AlertRulesError(_toml_line(source, str(exc))) from None
    lines = _LineIndex(text)
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        # an unknown key first: `abov = 300` also reports `above` missing, but the typo is
        # what the user has to fix
        err = min(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        raise AlertRulesError(
            f"{source}:{lines.line_of(err['loc'])}: {_explain(err)}") from None

    rules = tuple(r if r.name else r.model_copy(update={"name": default_name(r.kind, i)})
                  for i, r in enumerate(parsed.rule))
    names: dict[str, int] = {}
    for i, rule in enumerate(rules):
        if rule.label in names:
            raise AlertRulesError(
                f"{source}:{lines.line_of(('rule', i, rule.kind, 'name'))}: [[rule]] #{i + 1}: "
                f"name {rule.label!r} is already rule #{names[rule.label] + 1}'s; "
                f"give each rule its own name")
        names[rule.label] = i

    env = os.environ if environ is None else environ
    sinks: list[LogSinkConfig | WebhookSinkConfig] = []
    for i, sink in enumerate(parsed.sink):
        if isinstance(sink, WebhookSinkConfig) and sink.url_env is not None:
            line = lines.line_of(("sink", i, "webhook", "url_env"))
            where = f"{source}:{line}: [[sink]] #{i + 1}"
            value = env.get(sink.url_env, "").strip()
            if not value:
                raise AlertRulesError(f"{where}: environment variable {sink.url_env} is not set; "
                                      f"export the webhook URL in it")
            try:
                _check_url(value)
            except ValueError as e:
                raise AlertRulesError(f"{where}: {sink.url_env} {e}") from None
            sink = sink.model_copy(update={"url": SecretStr(value)})
        sinks.append(sink)
    if not sinks:  # a file without [[sink]] tables: alerts are logged
        sinks = [LogSinkConfig(type="log")]
    return AlertRules(source=source, rules=rules, sinks=tuple(sinks))


def _toml_line(source: str, message: str) -> str:
    """tomllib says 'Invalid value (at line 3, column 7)'; we say 'FILE:3: invalid value ...'."""
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", message)
    if m is None:
        return f"{source}: not valid TOML: {message}"
    what = message[: m.start()]
    return f"{source}:{m.group(1)}: not valid TOML: {what[:1].lower()}{what[1:]} " \
           f"(column {m.group(2)})"


# ---- turning a pydantic error into "line N: what to fix" ------------------------------------

_TABLE_KEYS: dict[str, dict[str, type[BaseModel]]] = {
    "rule": dict(RULE_MODELS),
    "sink": {"log": LogSinkConfig, "webhook": WebhookSinkConfig},
}
_DISCRIMINATOR = {"rule": "kind", "sink": "type"}


def _keys(model: type[BaseModel]) -> str:
    return ", ".join(f.alias or name for name, f in model.model_fields.items())


def _explain(err: Any) -> str:
    """One pydantic error as what to fix; never the offending value of a `url` (a secret)."""
    loc: tuple[Any, ...] = err["loc"]
    kind, msg = err["type"], err["msg"]
    if not loc:
        return "the file must be TOML tables: [[rule]] and [[sink]]"
    table = str(loc[0])
    if table not in _TABLE_KEYS:
        return f"unknown table or key {table!r}; the file holds [[rule]] and [[sink]] tables"
    if len(loc) == 1:
        if kind == "too_short" or kind == "missing":
            return f"no [[{table}]] tables; add at least one"
        return f"write each {table} as a [[{table}]] table (double brackets)"
    where = f"[[{table}]] #{int(loc[1]) + 1}"
    disc = _DISCRIMINATOR[table]
    choices = ", ".join(_TABLE_KEYS[table])
    if kind == "union_tag_invalid":
        return f"{where}: unknown {disc} {err['ctx']['tag']!r}; choose one of {choices}"
    if kind == "union_tag_not_found":
        return f"{where}: needs `{disc} = ...`, one of {choices}"
    if kind == "model_attributes_type" or kind == "model_type":
        return f"{where}: must be a table"
    tag = str(loc[2]) if len(loc) > 2 else ""
    where = f"{where} ({tag})"
    key = str(loc[3]) if len(loc) > 3 else None
    if kind == "extra_forbidden":
        return (f"{where}: unknown key {key!r}; a {tag} {table} takes "
                f"{_keys(_TABLE_KEYS[table][tag])}")
    if kind == "missing":
        return f"{where}: missing key {key!r}"
    if kind == "value_error":
        msg = str(err["ctx"]["error"])
    # TOML says array where pydantic says tuple
    msg = msg.replace("a valid tuple", 'an array, like ["a-*", "b"]').replace("Tuple", "The array")
    return f"{where}: {key}: {msg}" if key else f"{where}: {msg}"


class _LineIndex:
    """Where each table header and key sits in the text, found by a line scan.

    tomllib returns plain dicts without positions, and pydantic's errors name a path such as
    ('rule', 1, 'lag_seconds', 'abov'); this maps that path back to the key's line, or to the
    line of the 2nd `[[rule]]` header when the key is not written there (e.g. a missing one).
    """

    _HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?")
    _KEY = re.compile(r"^\s*(?:\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_\-]+))\s*[.=]")

    def __init__(self, text: str) -> None:
        self.headers: dict[tuple[Any, ...], int] = {}
        self.keys: dict[tuple[tuple[Any, ...], str], int] = {}
        counts: dict[str, int] = {}
        table: tuple[Any, ...] = ()
        in_string = False
        for n, line in enumerate(text.splitlines(), start=1):
            starts_in_string = in_string
            if (line.count('"""') + line.count("'''")) % 2:
                in_string = not in_string
            if starts_in_string:
                continue
            if m := self._HEADER.match(line):
                name = m.group(2).strip().strip("\"'")
                if m.group(1) == "[[":
                    table = (name, counts.get(name, 0))
                    counts[name] = table[1] + 1
                else:
                    table = (name,)
                self.headers.setdefault(table, n)
            elif m := self._KEY.match(line):
                key = next(g for g in m.groups() if g is not None)
                self.keys.setdefault((table, key), n)

    def line_of(self, loc: tuple[Any, ...]) -> int:
        if not loc:
            return 1
        name = str(loc[0])
        if len(loc) >= 2 and isinstance(loc[1], int):
            table = (name, loc[1])
            key = next((str(p) for p in loc[3:4]), None)  # loc[2] is the kind / type tag
            if key is not None and (table, key) in self.keys:
                return self.keys[(table, key)]
            if table in self.headers:
                return self.headers[table]
        for found in ((name, 0), (name,)):
            if found in self.headers:
                return self.headers[found]
        return self.keys.get(((), name), 1)
