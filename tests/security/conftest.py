"""Fixtures for the security tests: generated certificates and one broker process
with every kind of listener.

Listeners of `secure_broker`:
  PLAINTEXT       (--broker-addr)        administration, SCRAM users are added here
  SSL             ssl.client.auth=requested
  MTLS            SSL, ssl.client.auth=required, principal mapping rule
  SASL_PLAINTEXT  PLAIN, SCRAM-SHA-256 (SCRAM-SHA-512 not enabled: "wrong mechanism")
  SASL_SSL        PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
PLAIN users: alice (users file) and admin (JAAS `user_admin`); SCRAM users: scram256
and scram512 (AlterUserScramCredentials at start, through confluent-kafka's admin).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.security.certs import TestPki, make_pki
from tests.support.broker import BrokerProcess, free_port, wait_for_port

PASSWORDS = {"alice": "alice-secret", "admin": "admin-secret", "scram256": "s256-secret",
             "scram512": "s512-secret"}
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_admin="admin-secret";')


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@dataclass
class SecureBroker:
    proc: BrokerProcess
    ports: dict[str, int]
    pki: TestPki
    users_file: Path

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def secure_overrides(pki: TestPki, ports: dict[str, int], users_file: Path) -> dict[str, str]:
    return {
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()
                              if n != "PLAINTEXT"),
        "listener.security.protocol.map": "MTLS:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.broker.both),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules":
            "RULE:^CN=([a-z]+),OU=test.*$/$1/U,DEFAULT",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": JAAS,
        "jocko.sasl.plain.users.file": str(users_file),
        "connection.failed.authentication.delay.ms": "300",
        "connections.max.reauth.ms": "60000",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "offsets.topic.replication.factor": "1",
    }


def add_scram_users(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    ups = [
        UserScramCredentialUpsertion(
            "scram256", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
            PASSWORDS["scram256"].encode()),
        UserScramCredentialUpsertion(
            "scram512", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
            PASSWORDS["scram512"].encode()),
    ]
    for fut in admin.alter_user_scram_credentials(ups, request_timeout=20).values():
        fut.result(timeout=20)


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: TestPki
                  ) -> Iterator[SecureBroker]:
    work = tmp_path_factory.mktemp("secure")
    users = work / "plain-users.properties"
    users.write_text("# PLAIN users: name=password\nalice=alice-secret\n")
    ports = {n: free_port() for n in ("PLAINTEXT", "SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")}
    proc = BrokerProcess(work / "data", port=ports["PLAINTEXT"],
                         overrides=secure_overrides(pki, ports, users))
    proc.start()
    try:
        for p in ports.values():
            wait_for_port("127.0.0.1", p, timeout=10)
        add_scram_users(f"127.0.0.1:{ports['PLAINTEXT']}")
        yield SecureBroker(proc, ports, pki, users)
    finally:
        proc.stop()
