"""The Status page against the real embedded broker and Spark Connect server (AppTest)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic
from streamlit.testing.v1 import AppTest

from backend.netutil import free_port, wait_until
from tests.dashboard.conftest import APP, page_text


def _status_page(monkeypatch, env: dict[str, str]) -> AppTest:
    for key in ("GROUPSCOPE_BOOTSTRAP", "GROUPSCOPE_KAFKA_CONFIG", "GROUPSCOPE_KAFKA_PORT",
                "SPARK_REMOTE", "GROUPSCOPE_SPARK_PORT"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    at = AppTest.from_file(APP, default_timeout=30)
    at.switch_page("screens/status.py")
    return at


def test_status_shows_reachable_broker_engine_topic_and_group(
        monkeypatch, kafka, broker, spark_remote, unique, fresh_pollers):
    topic = f"status-{unique}"
    admin = AdminClient(kafka.client_config())
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    at = _status_page(monkeypatch, {"GROUPSCOPE_KAFKA_PORT": str(broker.port),
                                    "SPARK_REMOTE": spark_remote})

    def rendered():
        at.run()
        assert not at.exception, at.exception
        text = page_text(at)
        return text if topic in text and "Spark **" in text else None

    text = wait_until(rendered, timeout=60, what="status page showing the topic and Spark")
    badges = [m.value for m in at.markdown if "badge[" in m.value]
    assert sum("reachable" in b and "unreachable" not in b for b in badges) == 2, badges
    assert not at.error, [e.value for e in at.error]
    topics = next(df.value for df in at.dataframe if "topic" in df.value.columns)
    row = topics[topics["topic"] == topic]
    assert list(row["partitions"]) == [3]
    assert "__consumer_offsets" not in set(topics["topic"])  # internal topics hidden by default
    assert f"127.0.0.1:{broker.port}" in text


def test_status_shows_unreachable_cluster_error_without_secrets(
        monkeypatch, tmp_path, fresh_pollers):
    secret = f"s3cret-{free_port()}"
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f"sasl.username=alice\nsasl.password={secret}\n")
    dead_kafka, dead_spark = free_port(), free_port()
    at = _status_page(monkeypatch, {"GROUPSCOPE_BOOTSTRAP": f"127.0.0.1:{dead_kafka}",
                                    "GROUPSCOPE_KAFKA_CONFIG": str(config),
                                    "SPARK_REMOTE": f"sc://127.0.0.1:{dead_spark}"})

    def errored():
        at.run()
        assert not at.exception, at.exception
        return [e.value for e in at.error] if len(at.error) == 2 else None

    errors = wait_until(errored, timeout=30, what="both errors on the status page")
    assert any(f"127.0.0.1:{dead_kafka}" in e and "refused the connection" in e for e in errors), \
        errors
    assert any(f"127.0.0.1:{dead_spark}" in e for e in errors), errors
    badges = [m.value for m in at.markdown if "badge[" in m.value]
    assert sum("unreachable" in b for b in badges) == 2, badges
    text = page_text(at)
    assert secret not in text
    assert "SASL_PLAINTEXT" in text  # the safe description of the cluster is shown
    assert not at.dataframe  # no topics or groups invented when nothing answered


def test_bad_kafka_config_is_one_line_error_in_place(monkeypatch, tmp_path, fresh_pollers):
    config = tmp_path / "broken.properties"
    config.write_text("security.protocol=SSL\nthis line is wrong\n")
    at = _status_page(monkeypatch, {"GROUPSCOPE_BOOTSTRAP": f"127.0.0.1:{free_port()}",
                                    "GROUPSCOPE_KAFKA_CONFIG": str(config),
                                    "SPARK_REMOTE": f"sc://127.0.0.1:{free_port()}"})

    def errored():
        at.run()
        return [e.value for e in at.error if "broken.properties" in e.value] or None

    errors = wait_until(errored, timeout=30, what="the config error on the page")
    assert ":2:" in errors[0] and "\n" not in errors[0]
    assert not at.exception
