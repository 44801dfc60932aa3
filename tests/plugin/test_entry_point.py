"""The plugin is found through its `pytest11` entry point: a suite outside this
repository (no conftest, no `-p`) gets the fixtures by having jocko-py installed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

USER_TEST = textwrap.dedent('''
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient

    def test_round_trip(kafka_broker):
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap_servers)
        producer.send("greetings", b"hello").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer("greetings", bootstrap_servers=str(kafka_broker),
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        assert next(iter(consumer)).value == b"hello"
        consumer.close()
        # pytest.ini's jocko_broker_properties reached the broker
        admin = KafkaAdminClient(bootstrap_servers=str(kafka_broker))
        assert len(admin.describe_topics(["greetings"])[0]["partitions"]) == 3
        admin.close()
''')


def test_fixtures_come_from_the_installed_entry_point(tmp_path: Path) -> None:
    (tmp_path / "test_app.py").write_text(USER_TEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\njocko_broker_properties =\n"
                                         "    num.partitions=3\n")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py",
         "--fixtures"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert "kafka_broker [session scope]" in out.stdout, out.stdout + out.stderr
    assert "kafka_cluster [session scope]" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
