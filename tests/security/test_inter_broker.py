"""Two brokers whose inter-broker listener is SASL_SSL (inter.broker.listener.name,
PLAIN with the JAAS username/password, TLS with the broker's own keystore), with an
authorizer whose super user is the broker principal: replication and controller
forwarding run over it (acks=all with min.insync.replicas=2 needs the follower's
fetches), while clients use their own listener and see its addresses. SCRAM users and
ACLs created through one broker (forwarded to the controller) are enforced by the
other: they are replicated metadata records. Quotas too, and the controller's refusals
come back through the forwarding broker entry by entry."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from jocko_py.protocol.errors import ErrorCode
from tests.security.certs import TestPki
from tests.security.raw import Raw
from tests.support.broker import free_port
from tests.support.cluster import Cluster, ClusterBroker

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="broker" password="broker-pw" user_broker="broker-pw" user_app="app-pw";')


@pytest.fixture(scope="module")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory, pki: TestPki
                   ) -> Iterator[dict[int, tuple[ClusterBroker, int]]]:
    clients: dict[int, int] = {}

    def listeners(i: int) -> dict[str, str]:
        internal, clients[i] = free_port(), free_port()
        return {"listeners": f"INTERNAL://127.0.0.1:{internal},CLIENT://127.0.0.1:{clients[i]}"}

    props = {
        "listener.security.protocol.map": "INTERNAL:SASL_SSL,CLIENT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(pki.broker.both),
        "ssl.truststore.location": str(pki.ca.cert),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:broker;User:ANONYMOUS",
        "offsets.topic.replication.factor": "2",
        # sessions expire: brokers must re-authenticate among themselves too
        "connections.max.reauth.ms": "1500",
    }
    # started one by one (the test waits for both to register itself); a whole-cluster
    # stop: both at once (no leadership to hand over)
    c = Cluster(tmp_path_factory.mktemp("secure-cluster"), size=2, overrides=props,
                per_broker=listeners)
    try:
        for b in c.brokers.values():
            b.start()
        yield {i: (b, clients[i]) for i, b in c.brokers.items()}
    finally:
        c.stop()


def test_replication_runs_over_the_sasl_ssl_inter_broker_listener(
        secure_cluster: dict[int, tuple[ClusterBroker, int]]) -> None:
    from confluent_kafka import Producer

    (b1, client1), (b2, client2) = secure_cluster[1], secure_cluster[2]
    deadline = time.monotonic() + 60
    brokers: list[int] = []
    while time.monotonic() < deadline:  # both registered, seen on the CLIENT listener
        try:
            with Raw(f"127.0.0.1:{client2}").login("app", "app-pw") as c:
                md = c.call(3, 12, {"topics": None})
                brokers = sorted(b.port for b in md.brokers)
                if brokers == sorted((client1, client2)) and md.controller_id > 0:
                    break
        except OSError:
            pass
        time.sleep(0.3)
    assert brokers == sorted((client1, client2)), (b1.log_tail(), b2.log_tail())
    with Raw(f"127.0.0.1:{client2}").login("broker", "broker-pw") as c:  # a super user
        r = c.call(19, 7, {"topics": [{"name": "replicated", "num_partitions": 1,
                                       "replication_factor": 2, "configs": [
                                           {"name": "min.insync.replicas", "value": "2"}]}],
                           "timeout_ms": 15000})
        assert r.topics[0].error_code == 0, r.topics[0].error_message
    p = Producer({"bootstrap.servers": f"127.0.0.1:{client1}", "security.protocol":
                  "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "broker",
                  "sasl.password": "broker-pw", "acks": "all", "message.timeout.ms": 30000})
    errors: list[object] = []
    for i in range(20):
        p.produce("replicated", f"v{i}".encode(), on_delivery=lambda e, m: errors.append(e))
    p.flush(40)
    assert errors == [None] * 20, (errors[:3], b1.log_tail(), b2.log_tail())
    time.sleep(2)  # past a session lifetime: fetchers and heartbeats re-authenticate
    p.produce("replicated", b"late", on_delivery=lambda e, m: errors.append(e))
    p.flush(20)
    assert errors == [None] * 21, errors[-1]
    for b in (b1, b2):
        log = b.log_path.read_text()
        assert "SASL authentication to" not in log and "closing connection" not in log, \
            b.log_tail()


def test_scram_users_and_acls_are_replicated(
        secure_cluster: dict[int, tuple[ClusterBroker, int]]) -> None:
    from jocko_py.broker.security.scram import ScramClient, salted_password

    (_, client1), (_, client2) = secure_cluster[1], secure_cluster[2]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait for a controller
        try:
            with Raw(f"127.0.0.1:{client2}").login("broker", "broker-pw") as c:
                if c.call(3, 12, {"topics": None}).controller_id > 0:
                    break
        except OSError:
            pass
        time.sleep(0.3)
    salt = b"0123456789abcdef"
    for port in (client1, client2):  # one of them forwards to the controller
        with Raw(f"127.0.0.1:{port}").login("broker", "broker-pw") as c:
            name = f"user{port}"
            r = c.call(51, 0, {"deletions": [], "upsertions": [{
                "name": name, "mechanism": 1, "iterations": 4096, "salt": salt,
                "salted_password": salted_password("sha256", b"pw", salt, 4096)}]})
            assert r.results[0].error_code == 0, r.results[0].error_message
            r = c.call(30, 3, {"creations": [{
                "resource_type": 2, "resource_name": f"t{port}", "resource_pattern_type": 3,
                "principal": f"User:{name}", "host": "*", "operation": 8,
                "permission_type": 3}]})
            assert r.results[0].error_code == 0, r.results[0].error_message
            r = c.call(19, 7, {"topics": [{"name": f"t{port}", "num_partitions": 1,
                                           "replication_factor": 2}], "timeout_ms": 15000})
            assert r.topics[0].error_code == 0
    for made_on, other in ((client1, client2), (client2, client1)):
        name = f"user{made_on}"
        ok = False
        while time.monotonic() < deadline and not ok:  # applied by the other broker
            with Raw(f"127.0.0.1:{other}") as c:
                c.handshake("SCRAM-SHA-256")
                cl = ScramClient("SCRAM-SHA-256", name, "pw")
                r1 = c.authenticate(cl.first())
                if r1.error_code == 0:
                    r2 = c.authenticate(cl.final(bytes(r1.auth_bytes)))
                    assert r2.error_code == 0
                    names = {t.name for t in c.call(3, 12, {"topics": None}).topics}
                    ok = names == {f"t{made_on}"}  # the ACL applies there too
            if not ok:
                time.sleep(0.2)
        assert ok, f"{name} (made on {made_on}) not usable on {other}"


def test_quotas_and_refusals_are_forwarded(
        secure_cluster: dict[int, tuple[ClusterBroker, int]]) -> None:
    """Each broker (one of them forwards to the controller) answers AlterClientQuotas,
    DeleteAcls and AlterUserScramCredentials with the controller's per-entry decision,
    refusals included; a quota set through one broker is described by the other."""
    ports = [client for _, client in secure_cluster.values()]
    deadline = time.monotonic() + 60
    for port in ports:
        with Raw(f"127.0.0.1:{port}").login("broker", "broker-pw") as c:
            user = f"q{port}"
            while True:  # until a controller answers
                r = c.call(49, 1, {"validate_only": False, "entries": [
                    {"entity": [{"entity_type": "user", "entity_name": user}],
                     "ops": [{"key": "producer_byte_rate", "value": 2048.0, "remove": False}]},
                    {"entity": [{"entity_type": "ip", "entity_name": "10.0.0.1"}],
                     "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}]})
                if r.entries[0].error_code != ErrorCode.NOT_CONTROLLER or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            assert [e.error_code for e in r.entries] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST], r
            assert r.entries[1].error_message.startswith("Unsupported entity type ip")
            assert [(x.entity_type, x.entity_name) for x in r.entries[0].entity] == [
                ("user", user)]
            r = c.call(31, 3, {"filters": [{
                "resource_type_filter": 2, "resource_name_filter": f"none-{port}",
                "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                "operation": 1, "permission_type": 1}]})
            assert [(f.error_code, len(f.matching_acls)) for f in r.filter_results] == [
                (ErrorCode.NONE, 0)]
            r = c.call(51, 0, {"deletions": [{"name": f"ghost{port}", "mechanism": 1}],
                               "upsertions": []})
            assert [(x.user, x.error_code) for x in r.results] == [
                (f"ghost{port}", ErrorCode.RESOURCE_NOT_FOUND)]
    for made_on, other in ((ports[0], ports[1]), (ports[1], ports[0])):
        seen: list[object] = []
        while time.monotonic() < deadline:  # applied by the other broker
            with Raw(f"127.0.0.1:{other}").login("broker", "broker-pw") as c:
                r = c.call(48, 1, {"components": [
                    {"entity_type": "user", "match_type": 0, "match": f"q{made_on}"}],
                    "strict": False})
            seen = [(tuple((x.entity_type, x.entity_name) for x in e.entity),
                     [(v.key, v.value) for v in e["values"]]) for e in r.entries]
            if seen:
                break
            time.sleep(0.2)
        assert seen == [((("user", f"q{made_on}"),), [("producer_byte_rate", 2048.0)])], seen
