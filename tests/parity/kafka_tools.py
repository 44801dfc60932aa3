"""Run Apache Kafka's own command-line tools (3.9 and 4.1) against a broker.

3.9: `.cache/kafka-tools-jars` (make -C tests/java tools) plus 3.9's core jar for
kafka-configs (`.cache-extra/kafka-core-39-jars`); 4.1: `.cache-extra/kafka-tools-4-jars`
(both from `make -C tests/java parity-tools`, part of `make test`'s java-deps).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.support.prereq import missing

REPO = Path(__file__).resolve().parents[2]
CLASSPATHS = {
    "3.9": [REPO / ".cache" / "kafka-tools-jars", REPO / ".cache-extra" / "kafka-core-39-jars"],
    "4.1": [REPO / ".cache-extra" / "kafka-tools-4-jars"],
}
VERSIONS = sorted(CLASSPATHS)
# Apache Kafka 4.4.0's tools (make -C tests/java kafka-44), for the tests that name them
CLASSPATHS["4.4"] = [REPO / ".cache-extra" / "kafka-44-jars"]
CONFIGS = "kafka.admin.ConfigCommand"
TOPICS = "org.apache.kafka.tools.TopicCommand"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
FEATURES = "org.apache.kafka.tools.FeatureCommand"
QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"


def require(version: str) -> None:
    absent = [d for d in CLASSPATHS[version] if not (d / ".done").exists()]
    if absent or shutil.which("java") is None:
        missing(f"Kafka {version} tools not fetched (make -C tests/java parity-tools) "
                    "or no java")


def run(version: str, cls: str, *args: str, timeout: float = 120) -> str:
    """The tool's stdout; fails the test (with its output) on a non-zero exit."""
    require(version)
    cp = ":".join(f"{d}/*" for d in CLASSPATHS[version])
    proc = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", cp, cls, *args],
        capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{cls} {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def run_failing(version: str, cls: str, *args: str, timeout: float = 120) -> str:
    """stdout + stderr of a tool run expected to report a failure (any exit code)."""
    require(version)
    cp = ":".join(f"{d}/*" for d in CLASSPATHS[version])
    proc = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", cp, cls, *args],
        capture_output=True, text=True, timeout=timeout)
    return proc.stdout + proc.stderr
