"""The join card's snippets: valid Python and shell, verbatim, with the room's own values."""

from __future__ import annotations

import ast
import shlex

from backend.contracts.room import RoomInfo
from dashboard import room_model as rm


def room(**over: object) -> RoomInfo:
    fields: dict[str, object] = dict(
        address="192.168.1.20", bootstrap="192.168.1.20:9094",
        dashboard_url="http://192.168.1.20:8501", spark_remote="sc://192.168.1.20:15002",
        topic="telemetry", group="telemetry-summariser", version="0.3.0",
        wheel="groupscope-0.3.0-py3-none-any.whl")
    fields.update(over)
    return RoomInfo.model_validate(fields)


def _consumer_config(code: str) -> tuple[dict[str, object], list[str]]:
    """The dict given to Consumer(...) and the topics given to subscribe(...), from the AST."""
    tree = ast.parse(code)
    config: dict[str, object] = {}
    topics: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "Consumer":
            d = node.args[0]
            assert isinstance(d, ast.Dict)
            for k, v in zip(d.keys, d.values, strict=True):
                assert isinstance(k, ast.Constant)
                config[k.value] = v.value if isinstance(v, ast.Constant) else ast.unparse(v)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "subscribe":
            topics = ast.literal_eval(node.args[0])
    return config, topics


def test_python_consumer_compiles_and_joins_the_rooms_group_on_its_topic():
    code = rm.python_consumer(room())
    compile(code, "join.py", "exec")
    config, topics = _consumer_config(code)
    assert config["bootstrap.servers"] == "192.168.1.20:9094"
    assert config["group.id"] == "telemetry-summariser"
    assert config["client.id"] == "NAME"  # the variable the participant edits
    assert topics == ["telemetry"]
    assert 'NAME = "your-name"' in code
    assert "consumer.close()" in code and "KeyboardInterrupt" in code
    assert len(code.splitlines()) <= 30


def test_python_consumer_stays_valid_with_awkward_values():
    odd = room(group='we"ird \\ group', topic="t'x")
    code = rm.python_consumer(odd)
    compile(code, "join.py", "exec")
    config, topics = _consumer_config(code)
    assert config["group.id"] == 'we"ird \\ group' and topics == ["t'x"]


def _words(script: str) -> list[list[str]]:
    return [shlex.split(line, comments=True) for line in script.splitlines()
            if shlex.split(line, comments=True)]


def _flags(argv: list[str]) -> dict[str, str]:
    return {a: argv[i + 1] for i, a in enumerate(argv) if a.startswith("--")
            and i + 1 < len(argv)}


def test_console_consumer_line():
    odd = room(group="my group")
    first, line = _words(rm.console_consumer(odd))
    assert first == ["NAME=your-name"]
    assert line[0] == "kafka-console-consumer.sh"
    flags = _flags(line)
    assert flags["--bootstrap-server"] == "192.168.1.20:9094"
    assert flags["--topic"] == "telemetry" and flags["--group"] == "my group"
    assert flags["--consumer-property"] == "client.id=$NAME"
    assert "print.key=true" in line


def test_replica_commands_hide_the_token_until_it_is_given():
    hidden = _words(rm.replica_commands(room()))
    assert hidden[1] == ["pip", "install", "groupscope-0.3.0-py3-none-any.whl"]
    flags = _flags(hidden[2])
    assert hidden[2][:2] == ["groupscope", "replica"]
    assert flags["--spark-token"] == rm.TOKEN_PLACEHOLDER
    assert flags["--bootstrap"] == "192.168.1.20:9094"
    assert flags["--spark-remote"] == "sc://192.168.1.20:15002"
    assert flags["--group"] == "telemetry-summariser" and flags["--topic"] == "telemetry"
    assert flags["--id"] == "$NAME"

    shown = rm.replica_commands(room(), token="s3cr3t;rm -rf x")
    assert _flags(_words(shown)[2])["--spark-token"] == "s3cr3t;rm -rf x"  # one quoted word


def test_replica_commands_without_a_wheel_say_so():
    for script in (rm.replica_commands(room(wheel=None)),
                   rm.replica_commands(room(), wheel_ready=False)):
        assert "pip install" not in script and "no wheel" in script


def test_wheel_path_serves_only_a_wheel_file_in_the_data_dir(tmp_path):
    wheel = tmp_path / "groupscope-0.3.0-py3-none-any.whl"
    assert rm.wheel_path(tmp_path, room()) is None  # named but not built
    wheel.write_bytes(b"PK")
    assert rm.wheel_path(tmp_path, room()) == wheel
    assert rm.wheel_path(tmp_path, room(wheel="../groupscope-0.3.0-py3-none-any.whl")) is None
    (tmp_path / "room.passcode").write_text("x")
    assert rm.wheel_path(tmp_path, room(wheel="room.passcode")) is None
    assert rm.wheel_path(tmp_path, room(wheel=None)) is None


def test_qr_code_is_a_png():
    png = rm.qr_png("http://192.168.1.20:8501")
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 200
