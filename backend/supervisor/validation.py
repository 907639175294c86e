"""Request-body checks for the control API: strict types, explicit ranges, one clear message.

Pure functions, so every refusal is unit-tested without a server. Booleans are refused where
numbers are expected (JSON `true` is not 1 here), and unknown fields are refused rather than
ignored, so a typo never looks like success.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_BODY_BYTES = 64 * 1024
MAX_RATE = 100_000.0  # messages per second for the in-process simulator
MAX_STREAMS = 10_000
MAX_PARTITIONS = 1_000


class RequestError(Exception):
    """An invalid request: answered with `status` and the message, nothing changed."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def parse_body(raw: bytes) -> dict[str, Any]:
    """The JSON object in a request body; an empty body is an empty object."""
    if len(raw) > MAX_BODY_BYTES:
        raise RequestError(f"request body over {MAX_BODY_BYTES} bytes", status=413)
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(f"request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestError("request body is not valid JSON: nested too deeply") from None
    if not isinstance(value, dict):
        raise RequestError(f"request body must be a JSON object, not {_json_type(value)}")
    return value


def only_fields(body: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        expected = ", ".join(allowed) if allowed else "no fields"
        raise RequestError(f"unknown field(s) {', '.join(unknown)}; expected {expected}")


def require_int(body: dict[str, Any], key: str, lo: int, hi: int) -> int:
    if key not in body:
        raise RequestError(f"missing field {key!r} (a whole number from {lo} to {hi})")
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{key} must be a whole number, not {_json_type(value)}")
    if not lo <= value <= hi:
        raise RequestError(f"{key} must be between {lo} and {hi}, not {value}")
    return value


def require_number(body: dict[str, Any], key: str, lo: float, hi: float,
                   lo_inclusive: bool = False) -> float:
    if key not in body:
        raise RequestError(f"missing field {key!r} (a number above {lo:g} up to {hi:g})")
    value = body[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RequestError(f"{key} must be a number, not {_json_type(value)}")
    value = float(value)
    too_low = value < lo if lo_inclusive else value <= lo
    if not math.isfinite(value) or too_low or value > hi:
        bound = f"from {lo:g}" if lo_inclusive else f"above {lo:g}"
        raise RequestError(f"{key} must be {bound} up to {hi:g}, not {value:g}")
    return value


def optional_bool(body: dict[str, Any], key: str) -> bool | None:
    if key not in body or body[key] is None:
        return None
    value = body[key]
    if not isinstance(value, bool):
        raise RequestError(f"{key} must be true or false, not {_json_type(value)}")
    return value


def optional_choice(body: dict[str, Any], key: str, choices: tuple[str, ...]) -> str | None:
    if key not in body or body[key] is None:
        return None
    value = body[key]
    if not isinstance(value, str):
        raise RequestError(f"{key} must be a string, not {_json_type(value)}")
    if value not in choices:
        raise RequestError(f"{key} must be one of {', '.join(choices)}, not {value!r}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
