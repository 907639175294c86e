"""An exception as the one line a user sees: the one place that knows how libraries word them.

Pages, logs, replica events and one-line command errors all show exceptions raised by
libraries with shapes of their own: librdkafka hides its error name in a `KafkaError`
argument, gRPC (and pyspark, which pastes gRPC's text into its own exceptions) spreads a
status over several lines, urllib puts the cause in `.reason`, pydantic lists every field it
refused. Wording them here once means a page, a log and an event name the same failure with
the same words, and a fix to one shape reaches every reader.

It imports nothing but `sys`, so every layer may use it, the contracts' neighbours and the
replica's hot loop included, without pulling in a client library: each library's exception
type is looked up among the modules already imported (an exception of a library nobody
imported cannot exist). `lint-imports` keeps it free of groupscope's own packages and a unit
test keeps it free of third-party ones.
"""

from __future__ import annotations

import sys

# Long enough for a librdkafka or Spark message with its cause, short enough for a page's
# error box and for an event on the events topic.
DEFAULT_LIMIT = 500
_ELLIPSIS = "…"
_GRPC_MARK = "of RPC that terminated with"  # grpc._channel's text for a failed call


def one_line(exc: BaseException, limit: int | None = DEFAULT_LIMIT) -> str:
    """`exc` as one line of at most `limit` characters (None: no limit).

    - librdkafka (`KafkaException(KafkaError)`): `NAME: text`, e.g. `_TRANSPORT: broker down`
    - gRPC, raw or inside pyspark's message: `STATUS: details`, e.g. `UNAVAILABLE: failed to
      connect to all addresses`
    - urllib's `URLError`: its reason (`[Errno 111] Connection refused`), not `<urlopen error>`
    - pydantic's `ValidationError`: the first complaint, `field: message` (a model-level
      check's own message alone, without pydantic's "Value error, ")
    - anything else: the first line that is not blank
    - no message at all: the exception's type name, so a line is never empty
    """
    text = _first_line(_worded(exc)) or type(exc).__name__
    if limit is not None and len(text) > limit:
        return text[:max(0, limit - len(_ELLIPSIS))] + _ELLIPSIS
    return text


def _worded(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    name, text = getattr(err, "name", None), getattr(err, "str", None)
    if callable(name) and callable(text):  # confluent-kafka's KafkaError, duck-typed
        detail = _first_line(str(text()))
        return f"{name()}: {detail}" if detail else str(name())
    urllib_error = sys.modules.get("urllib.error")
    if (urllib_error is not None and isinstance(exc, urllib_error.URLError)
            and not isinstance(exc, urllib_error.HTTPError)):  # "HTTP Error 404: …" says it
        reason = exc.reason
        return one_line(reason, None) if isinstance(reason, BaseException) else str(reason)
    pydantic_core = sys.modules.get("pydantic_core")
    if pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError):
        return _validation(exc)
    raw = str(exc)
    return _grpc(raw) or raw


def _validation(exc: BaseException) -> str:
    errors = exc.errors()  # type: ignore[attr-defined]
    if not errors:
        return str(exc)
    first = errors[0]
    message = str(first.get("msg", "")).removeprefix("Value error, ")
    where = ".".join(str(part) for part in first.get("loc", ()))
    return f"{where}: {message}" if where else message


def _grpc(raw: str) -> str:
    """`STATUS: details` from gRPC's text (`<_InactiveRpcError of RPC that terminated with:`
    then `status = StatusCode.X` and `details = "..."` lines), or "" for any other text.
    Read from the text rather than the call object because pyspark re-raises gRPC errors as
    its own exceptions with that text as their message."""
    if _GRPC_MARK not in raw:
        return ""
    status = details = ""
    for line in raw.splitlines():
        key, sep, value = line.strip().partition(" = ")
        if sep and key == "status":
            status = value.strip().removeprefix("StatusCode.")
        elif sep and key == "details":
            details = value.strip().removeprefix('"').removesuffix('"')
    if status and details:
        return f"{status}: {details}"
    return status or details


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""
