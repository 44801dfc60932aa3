"""Apache Kafka's own command-line tools (3.9.2, from Maven) against three jocko-py
brokers: kafka-metadata-quorum, kafka-leader-election, kafka-reassign-partitions."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jocko_py.client import Client
from tests.support.broker import REPO
from tests.support.cluster import Cluster
from tests.support.prereq import requires

pytestmark = [pytest.mark.cluster, pytest.mark.java, pytest.mark.timeout(240)]

TOOLS = REPO / ".cache" / "kafka-tools-jars"
needs_tools = requires(
    (TOOLS / ".done").exists() and shutil.which("java") is not None,
    "Kafka's tools not fetched (make -C tests/java tools) or no java")


def tool(cls: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-cp", f"{TOOLS}/*", cls, *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO)


@needs_tools
def test_kafka_tools_on_a_cluster(cluster: Cluster, tmp_path: Path) -> None:
    b1, b2 = cluster.brokers[1].bootstrap, cluster.brokers[2].bootstrap
    st = tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", b2,
              "describe", "--status")
    assert st.returncode == 0, st.stderr
    fields = dict(line.split(":", 1) for line in st.stdout.splitlines() if ":" in line)
    assert int(fields["LeaderId"]) == cluster.metadata().controller_id
    for i in (1, 2, 3):
        assert f'"id": {i}' in fields["CurrentVoters"]
    rep = tool("org.apache.kafka.tools.MetadataQuorumCommand", "--bootstrap-server", b1,
               "describe", "--replication")
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout.count("Leader") >= 1 and rep.stdout.count("Follower") == 2

    with Client(b1) as c:
        c.create_topic("tools", 1, 2)
    le = tool("org.apache.kafka.tools.LeaderElectionCommand", "--bootstrap-server", b1,
              "--election-type", "preferred", "--all-topic-partitions")
    assert le.returncode == 0, le.stderr + le.stdout
    assert "Valid replica already elected" in le.stdout

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tools", "partition": 0, "replicas": [1, 2, 3]}]}))
    ex = tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
              "--bootstrap-server", b1, "--reassignment-json-file", str(plan), "--execute")
    assert ex.returncode == 0, ex.stderr + ex.stdout
    assert "Successfully started partition reassignment" in ex.stdout

    def verified() -> bool:
        v = tool("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                 "--bootstrap-server", b1, "--reassignment-json-file", str(plan), "--verify")
        return v.returncode == 0 and "is completed" in v.stdout
    cluster.wait_for("reassignment verified", verified, timeout=60)
    assert sorted(cluster.metadata(topics=["tools"]).topics[0].partitions[0].replica_nodes) \
        == [1, 2, 3]
