"""How an exception is worded for a user: one line, whatever library raised it."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
from email.message import Message
from pathlib import Path

import grpc
import pytest
from confluent_kafka import KafkaError, KafkaException
from grpc import _channel
from pydantic import BaseModel, Field, ValidationError, model_validator
from pyspark.errors.exceptions.connect import SparkConnectGrpcException

from backend.errors import DEFAULT_LIMIT, one_line

REPO = Path(__file__).resolve().parents[2]
REFUSED = ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:15002: "
           "Failed to connect to remote host: Connection refused")


def _rpc_error() -> grpc.RpcError:
    """The error a gRPC call raises when nothing listens (as grpc builds it)."""
    state = _channel._RPCState((), None, None, grpc.StatusCode.UNAVAILABLE, REFUSED)
    return _channel._InactiveRpcError(state)


class _Rate(BaseModel):
    rate: float = Field(gt=0)
    items: list[int] = []


class _Choice(BaseModel):
    protocol: str

    @model_validator(mode="after")
    def _known(self) -> _Choice:
        raise ValueError("unknown protocol 'eager'; choose one of classic, consumer")


def _invalid(model: type[BaseModel], data: dict[str, object]) -> ValidationError:
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return exc
    raise AssertionError("expected a ValidationError")


CASES = [
    pytest.param(KafkaException(KafkaError(KafkaError._TRANSPORT, "broker down")),
                 "_TRANSPORT: broker down", id="librdkafka-name-and-text"),
    pytest.param(KafkaException(KafkaError(KafkaError._TRANSPORT, "")),
                 "_TRANSPORT", id="librdkafka-name-without-text"),
    pytest.param(KafkaException("changelog write not acknowledged"),
                 "changelog write not acknowledged", id="kafka-exception-with-a-plain-text"),
    pytest.param(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")),
                 "[Errno 111] Connection refused", id="urllib-reason-an-os-error"),
    pytest.param(urllib.error.URLError("unknown url type: sc"),
                 "unknown url type: sc", id="urllib-reason-a-text"),
    pytest.param(urllib.error.URLError(TimeoutError()), "TimeoutError",
                 id="urllib-reason-without-message"),
    pytest.param(urllib.error.HTTPError("http://x/api", 404, "Not Found", Message(), None),
                 "HTTP Error 404: Not Found", id="http-error-keeps-its-code"),
    pytest.param(_rpc_error(), f"UNAVAILABLE: {REFUSED}", id="grpc-status-and-details"),
    pytest.param(SparkConnectGrpcException(message=str(_rpc_error())),
                 f"UNAVAILABLE: {REFUSED}", id="grpc-text-inside-pyspark"),
    pytest.param(RuntimeError("status = 3 is not allowed\nsecond line"),
                 "status = 3 is not allowed", id="status-words-outside-grpc-are-text"),
    pytest.param(_invalid(_Rate, {"rate": 0}), "rate: Input should be greater than 0",
                 id="pydantic-field-and-message"),
    pytest.param(_invalid(_Rate, {"rate": 1, "items": [1, "x"]}),
                 "items.1: Input should be a valid integer, unable to parse string as an "
                 "integer", id="pydantic-nested-location"),
    pytest.param(_invalid(_Choice, {"protocol": "eager"}),
                 "unknown protocol 'eager'; choose one of classic, consumer",
                 id="pydantic-model-check-without-value-error-prefix"),
    pytest.param(RuntimeError("first\nsecond"), "first", id="first-line"),
    pytest.param(RuntimeError("\n   the real one  \nmore"), "the real one",
                 id="first-line-that-is-not-blank"),
    pytest.param(RuntimeError(), "RuntimeError", id="no-message-type-name"),
    pytest.param(ValueError("  \n "), "ValueError", id="blank-message-type-name"),
    pytest.param(KeyError("stream_id"), "'stream_id'", id="key-error-as-python-words-it"),
]


@pytest.mark.parametrize(("exc", "line"), CASES)
def test_one_line_words_each_library_s_errors(exc: BaseException, line: str) -> None:
    assert one_line(exc) == line


@pytest.mark.parametrize(("text", "limit", "line"), [
    ("abcdefghij", 10, "abcdefghij"),
    ("abcdefghijk", 10, "abcdefghi…"),
    ("abcdefghijk\nmore", None, "abcdefghijk"),
])
def test_one_line_keeps_within_its_limit(text: str, limit: int | None, line: str) -> None:
    assert one_line(RuntimeError(text), limit) == line


def test_the_default_limit_fits_a_page_s_error_box() -> None:
    assert one_line(RuntimeError("x" * DEFAULT_LIMIT)) == "x" * DEFAULT_LIMIT
    assert one_line(RuntimeError("x" * 5000)) == "x" * (DEFAULT_LIMIT - 1) + "…"


def test_importing_it_loads_no_client_library_and_nothing_of_groupscope() -> None:
    """Every layer imports it, the replica's hot loop too: it must stay this cheap."""
    code = ("import sys, backend.errors; "
            "print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('confluent_kafka', 'grpc', 'pyspark', 'pydantic', 'pydantic_core', 'dashboard') "
            "or m in ('urllib.error', 'urllib.request') "
            "or (m.startswith('backend.') and m != 'backend.errors'))))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    assert done.stdout.strip() == ""
