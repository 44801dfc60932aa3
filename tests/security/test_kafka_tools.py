"""Kafka's own tools (3.9.2) against jocko-py: `kafka-configs --alter --add-config
'SCRAM-SHA-256=[...]' --entity-type users`, user quotas, and `--describe`, then a client
logs in with that credential; `kafka-acls --add / --list / --remove`."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.certs import TestPki
from tests.security.clients import confluent_conf, confluent_round_trip
from tests.security.raw import Raw
from tests.support.broker import REPO, BrokerProcess, free_port, wait_for_port
from tests.support.prereq import requires

# JOCKO_KAFKA_TOOLS overrides where the jars are (default: what `make java-deps` fetches)
TOOLS = Path(os.environ.get("JOCKO_KAFKA_TOOLS", REPO / ".cache" / "kafka-tools-jars"))
pytestmark = [
    pytest.mark.java, pytest.mark.timeout(180),
    requires(shutil.which("java") is not None and any(TOOLS.glob("kafka_2.13-*.jar")),
             "Kafka's tools with kafka_2.13 not fetched (make java-deps)"),
]


def tool(cls: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", f"{TOOLS}/*",
                           cls, *args], capture_output=True, text=True, timeout=90, cwd=REPO)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    work = tmp_path_factory.mktemp("tools")
    sasl = free_port()
    proc = BrokerProcess(work / "data", overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "true"})
    proc.start()
    try:
        wait_for_port("127.0.0.1", sasl, timeout=10)
        yield proc, sasl
    finally:
        proc.stop()


def test_kafka_configs_manages_scram_users(broker: tuple[BrokerProcess, int], pki: TestPki
                                           ) -> None:
    proc, sasl = broker
    r = tool("kafka.admin.ConfigCommand", "--bootstrap-server", proc.bootstrap, "--alter",
             "--add-config", "SCRAM-SHA-256=[password=zed-pw],SCRAM-SHA-512=[iterations=8192,"
             "password=zed-pw2]", "--entity-type", "users", "--entity-name", "zed")
    assert r.returncode == 0 and "Completed updating config for user zed" in r.stdout, r.stderr
    r = tool("kafka.admin.ConfigCommand", "--bootstrap-server", proc.bootstrap, "--alter",
             "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152",
             "--entity-type", "users", "--entity-name", "zed")
    assert r.returncode == 0, r.stderr
    r = tool("kafka.admin.ConfigCommand", "--bootstrap-server", proc.bootstrap, "--describe",
             "--entity-type", "users", "--entity-name", "zed")
    assert r.returncode == 0, r.stderr
    assert "producer_byte_rate=1048576.0" in r.stdout and \
        "consumer_byte_rate=2097152.0" in r.stdout, r.stdout
    assert "SCRAM-SHA-256=iterations=4096" in r.stdout and \
        "SCRAM-SHA-512=iterations=8192" in r.stdout, r.stdout
    conf = confluent_conf(f"127.0.0.1:{sasl}", "SASL_PLAINTEXT", pki, "SCRAM-SHA-512", "zed",
                          "zed-pw2")
    assert confluent_round_trip(conf, n=2) == [b"v0", b"v1"]
    r = tool("kafka.admin.ConfigCommand", "--bootstrap-server", proc.bootstrap, "--alter",
             "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "zed")
    assert r.returncode == 0, r.stderr
    with Raw(proc.bootstrap) as c:
        infos = c.call(50, 0, {"users": [{"name": "zed"}]}).results[0].credential_infos
        assert [(i.mechanism, i.iterations) for i in infos] == [(1, 4096)]


def test_kafka_acls_add_list_remove(broker: tuple[BrokerProcess, int]) -> None:
    proc, _ = broker
    r = tool("kafka.admin.AclCommand", "--bootstrap-server", proc.bootstrap, "--add",
             "--allow-principal", "User:zed", "--operation", "Read", "--operation", "Write",
             "--topic", "orders", "--resource-pattern-type", "literal")
    assert r.returncode == 0, r.stderr
    r = tool("kafka.admin.AclCommand", "--bootstrap-server", proc.bootstrap, "--add",
             "--allow-principal", "User:zed", "--operation", "Read", "--group", "g")
    assert r.returncode == 0, r.stderr
    r = tool("kafka.admin.AclCommand", "--bootstrap-server", proc.bootstrap, "--list",
             "--topic", "orders")
    assert r.stdout.count("principal=User:zed") == 2, r.stdout
    r = tool("kafka.admin.AclCommand", "--bootstrap-server", proc.bootstrap, "--remove",
             "--force", "--allow-principal", "User:zed", "--operation", "Write", "--topic",
             "orders")
    assert r.returncode == 0, r.stderr
    r = tool("kafka.admin.AclCommand", "--bootstrap-server", proc.bootstrap, "--list")
    assert "operation=WRITE" not in r.stdout and r.stdout.count("operation=READ") == 2, r.stdout
