"""The rules file: the example loads, defaults are the documented ones, and every malformed
file is refused in one line naming the file, the exact line and what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.alerts.rules import (
    DEFAULT_FOR,
    DEFAULT_HEALTH,
    KINDS,
    RULE_MODELS,
    AlertRulesError,
    HealthRule,
    LagMessagesRule,
    LagSecondsRule,
    LogSinkConfig,
    RebalancesRule,
    WebhookSinkConfig,
    parse_rules,
    read_rules,
)
from backend.cli_common import UserError, format_duration, parse_duration

EXAMPLE = Path(__file__).resolve().parents[2] / "assets" / "alerts.example.toml"
HOOK = "https://hooks.example.com/services/T0/B0/s3cr3t-token"


def test_the_example_file_loads_and_shows_every_kind() -> None:
    rules = read_rules(EXAMPLE, {"GROUPSCOPE_ALERT_WEBHOOK": HOOK})
    assert set(KINDS) == set(RULE_MODELS) == set(DEFAULT_FOR)
    assert {r.kind for r in rules.rules} == set(KINDS)
    by_kind = {r.kind: r for r in rules.rules}
    lag = by_kind["lag_seconds"]
    assert isinstance(lag, LagSecondsRule)
    assert (lag.above, lag.resolve_at, lag.for_ms) == (300, 120, 300_000)
    assert lag.applies_to("payments-eu") and not lag.applies_to("orders")
    assert [type(s) for s in rules.sinks] == [LogSinkConfig, WebhookSinkConfig]
    hook = rules.sinks[1]
    assert isinstance(hook, WebhookSinkConfig) and hook.url is not None
    assert hook.url.get_secret_value() == HOOK
    assert HOOK not in repr(rules)


def test_the_example_without_its_environment_variable_names_it_and_its_line() -> None:
    line = next(n for n, text in enumerate(EXAMPLE.read_text().splitlines(), start=1)
                if text.startswith("url_env"))
    with pytest.raises(AlertRulesError) as err:
        read_rules(EXAMPLE, {})
    assert str(err.value).startswith(f"{EXAMPLE}:{line}: [[sink]] #2: ")
    assert "GROUPSCOPE_ALERT_WEBHOOK is not set" in str(err.value)
    assert isinstance(err.value, UserError)  # the CLI prints it as one line, exit 2


def test_defaults_are_the_documented_ones() -> None:
    rules = parse_rules("""
[[rule]]
kind = "health"
[[rule]]
kind = "lag_messages"
above = 1000
[[rule]]
kind = "rebalances"
more_than = 2
[[rule]]
kind = "empty_lag"
""").rules
    health, lag, storm, empty = rules
    assert isinstance(health, HealthRule) and health.health == DEFAULT_HEALTH
    assert health.for_ms == health.resolve_ms == 60_000
    assert health.groups == ("*",) and health.exclude == ()
    assert isinstance(lag, LagMessagesRule) and lag.resolve_at == 800
    assert lag.for_ms == lag.resolve_ms == 300_000
    assert isinstance(storm, RebalancesRule)
    assert (storm.for_ms, storm.within_ms, storm.resolve_ms) == (0, 600_000, 600_000)
    assert empty.for_ms == 300_000
    assert [r.label for r in rules] == ["health rule #1", "lag_messages rule #2",
                                        "rebalances rule #3", "empty_lag rule #4"]


REQUIRED = {"lag_seconds": "above = 1", "lag_messages": "above = 1", "rebalances": "more_than = 1"}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_without_for_takes_its_default_and_a_given_for_wins(kind: str) -> None:
    table = f'[[rule]]\nkind = "{kind}"\n{REQUIRED.get(kind, "")}\n'
    (default,) = parse_rules(table).rules
    assert default.for_ms == parse_duration(DEFAULT_FOR[kind])
    (given,) = parse_rules(table + 'for = "90s"\n').rules
    assert given.for_ms == 90_000


def test_no_sink_means_the_log() -> None:
    assert parse_rules('[[rule]]\nkind = "health"\n').sinks == (LogSinkConfig(type="log"),)


@pytest.mark.parametrize(("text", "ms"), [
    ("30s", 30_000), ("5m", 300_000), ("1h30m", 5_400_000), ("250ms", 250), ("0s", 0),
    ("1.5s", 1500), ("1d", 86_400_000),
])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration(text) == ms
    assert parse_duration(format_duration(ms)) == ms


@pytest.mark.parametrize("text", ["5", "5 minutes", "m", "", "5m 3", "-5m"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration like"):
        parse_duration(text)


# (file text, line the message must name, a fragment saying what to fix)
MALFORMED = [
    pytest.param('[[rule]]\nkind = "health"\n\n[[rule]]\nkind = "lag_seconds"\nabov = 300\n',
                 6, "[[rule]] #2 (lag_seconds): unknown key 'abov'; a lag_seconds rule takes "
                    "kind, name, groups, exclude, for, resolve_after, above, resolve_below",
                 id="unknown-key"),
    pytest.param('[[rule]]\nkind = "health"\n\n# lag\n[[rule]]\nkind = "lag_seconds"\n',
                 5, "[[rule]] #2 (lag_seconds): missing key 'above'", id="missing-key"),
    pytest.param('\n\n[[rule]]\nkind = "lag_second"\n', 3,
                 "unknown kind 'lag_second'; choose one of health, lag_seconds", id="bad-kind"),
    pytest.param('[[rule]]\nabove = 3\n', 1, "[[rule]] #1: needs `kind = ...`", id="no-kind"),
    pytest.param('[[rule]]\nkind = "health"\nfor = 5\n', 3,
                 "for: write a duration like '30s'", id="duration-not-a-string"),
    pytest.param('[[rule]]\nkind = "health"\n  for = "5 min"\n', 3,
                 "for: '5 min' is not a duration", id="bad-duration"),
    pytest.param('[[rule]]\nkind = "health"\nfor = "2d"\n', 3, "for: at most 1d",
                 id="too-long"),
    pytest.param('[[rule]]\nkind = "lag_messages"\nabove = 100\nresolve_below = 200\n', 4,
                 "resolve_below: must be at most `above` (100)", id="resolve-above-threshold"),
    pytest.param('[[rule]]\nkind = "lag_seconds"\nabove = -1\n', 3,
                 "above: Input should be greater than or equal to 0", id="negative"),
    pytest.param('[[rule]]\nkind = "health"\nhealth = ["STALL", "OK"]\n', 3,
                 "'OK' is not a health state to alert on", id="health-ok"),
    pytest.param('[[rule]]\nkind = "rebalances"\nmore_than = 3\nwithin = "2h"\n', 4,
                 "within: must be above 0s and at most 1h", id="window"),
    pytest.param('[[rule]]\nkind = "health"\ngroups = []\n', 3, "groups:", id="no-groups"),
    pytest.param('[rule]\nkind = "health"\n', 1, "write each rule as a [[rule]] table",
                 id="single-brackets"),
    pytest.param('[[sink]]\ntype = "log"\n', 1, "no [[rule]] tables; add at least one",
                 id="no-rules"),
    pytest.param('\n[[rules]]\nkind = "health"\n', 2, "unknown table or key 'rules'",
                 id="misspelt-table"),
    pytest.param('[[rule]]\nkind = "health"\nname = "a"\n[[rule]]\nkind = "health"\n'
                 'name = "a"\n', 6, "name 'a' is already rule #1's", id="duplicate-name"),
    pytest.param('[[rule]]\nkind = "health"\n[[sink]]\ntype = "slack"\n', 3,
                 "[[sink]] #1: unknown type 'slack'; choose one of log, webhook", id="sink-type"),
    pytest.param('[[rule]]\nkind = "health"\n[[sink]]\ntype = "webhook"\n', 3,
                 "give exactly one of `url` or `url_env`", id="webhook-without-url"),
    pytest.param('[[rule]]\nkind = "health"\n[[sink]]\ntype = "webhook"\n'
                 'url = "ftp://h/s3cr3t-token"\n', 5,
                 "url: must be an http:// or https:// URL with a host", id="webhook-bad-url"),
    pytest.param('[[rule]]\nkind = "health\n', 2, "not valid TOML: illegal character",
                 id="toml-syntax"),
    pytest.param('[[rule]]\nkind = "health"\nkind = "health"\n', 3,
                 "not valid TOML: cannot overwrite a value", id="toml-duplicate-key"),
    pytest.param('rule = [1]\n', 1, "[[rule]] #1: must be a table", id="inline-array"),
]


@pytest.mark.parametrize(("text", "line", "fix"), MALFORMED)
def test_a_malformed_file_is_refused_in_one_line_naming_its_line(
        text: str, line: int, fix: str) -> None:
    with pytest.raises(AlertRulesError) as err:
        parse_rules(text, "alerts.toml", {})
    message = str(err.value)
    assert message.startswith(f"alerts.toml:{line}: "), message
    assert fix in message
    assert "\n" not in message
    assert "s3cr3t" not in message


def test_a_key_in_a_later_table_is_found_in_that_table() -> None:
    text = '[[rule]]\nkind = "lag_seconds"\nabove = 1\n\n[[rule]]\nkind = "lag_seconds"\n' \
           'above = "x"\n'
    with pytest.raises(AlertRulesError, match=r"^alerts.toml:7: \[\[rule\]\] #2 "):
        parse_rules(text, "alerts.toml")


def test_a_multiline_string_does_not_confuse_the_line_scan() -> None:
    text = '[[rule]]\nkind = "health"\nname = """\n[[rule]]\nabov = 1\n"""\nabov = 2\n'
    with pytest.raises(AlertRulesError, match=r"^alerts.toml:7: .*unknown key 'abov'"):
        parse_rules(text, "alerts.toml")


def test_the_webhook_url_in_the_environment_is_checked_but_never_echoed() -> None:
    text = '[[rule]]\nkind = "health"\n[[sink]]\ntype = "webhook"\nurl_env = "HOOK"\n'
    with pytest.raises(AlertRulesError) as err:
        parse_rules(text, "alerts.toml", {"HOOK": "hooks/s3cr3t-token"})
    assert str(err.value).startswith("alerts.toml:5: [[sink]] #1: HOOK must be an http")
    assert "s3cr3t" not in str(err.value)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AlertRulesError, match=r"nope.toml: cannot read the alerts file \("):
        read_rules(tmp_path / "nope.toml")
    bad = tmp_path / "latin.toml"
    bad.write_bytes(b'[[rule]]\nname = "caf\xe9"\n')
    with pytest.raises(AlertRulesError, match="not UTF-8"):
        read_rules(bad)
