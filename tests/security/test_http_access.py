"""Who may use the web console and /metrics (broker/security/http_access.py), against
real embedded brokers whose listeners are secured:

- `acl_broker`: SASL_PLAINTEXT as the inter-broker listener (PLAIN, the console's own
  Kafka calls authenticate as `admin`), StandardAuthorizer, `super.users=User:admin`;
  the console over HTTPS (test CA) with `jocko.console.read.only=false` and
  `jocko.console.auth=basic,mtls` (a client certificate is requested); /metrics over
  plain HTTP with the default authentication once listeners are secured (Basic).
- `default_broker`: a SASL listener and nothing else set: the console (plain HTTP)
  requires Basic and is read-only; /metrics over HTTPS with `jocko.metrics.auth=mtls`.

SCRAM users are created over the wire (AlterUserScramCredentials, confluent-kafka's
admin client), ACLs with CreateAcls; requests are plain HTTP(S) with http.client, and
a headless Chromium (as tests/broker/test_console.py drives it) for the browser's view.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import re
import shutil
import ssl
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from jocko_py.broker.config import ConfigError, build_config
from jocko_py.broker.security.http_access import (
    FailureLog,
    HttpAccessSettings,
    console_read_only,
    parse_basic,
)
from jocko_py.broker.security.scram import make_credential, verify_password
from jocko_py.embedded import EmbeddedBroker
from tests.broker.test_console import CHROMIUM
from tests.security.certs import TestPki
from tests.security.raw import Raw
from tests.support.broker import free_port
from tests.support.prereq import requires

pytestmark = pytest.mark.timeout(120)

ADMIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret";')
SCRAM_USERS = {"alice": ("SCRAM-SHA-256", "alice-pw"), "bob": ("SCRAM-SHA-512", "bob-pw")}
TOPIC, CLUSTER, LITERAL, PREFIXED, ALLOW = 2, 4, 3, 4, 3
CREATE, WRITE = 5, 4


@dataclass
class Site:
    """One broker's console and metrics endpoints."""

    broker: EmbeddedBroker
    sasl_port: int
    console: str  # scheme://host:port
    metrics: str
    ca: ssl.SSLContext

    def request(self, url: str, method: str = "GET", auth: tuple[str, str] | None = None,
                form: dict[str, str] | None = None, ctx: ssl.SSLContext | None = None,
                ) -> tuple[int, dict[str, str], str]:
        return request(url, method, auth, form, ctx or self.ca)

    def token(self, auth: tuple[str, str]) -> str:
        status, _, body = self.request(self.console + "/produce", auth=auth)
        assert status == 200, body
        m = re.search(r'name="csrf" value="([^"]+)"', body)
        assert m is not None, "the console's forms carry no token"
        return m.group(1)

    def topics(self) -> set[str]:
        return set(self.broker.broker.image.topics)


def request(url: str, method: str = "GET", auth: tuple[str, str] | None = None,
            form: dict[str, str] | None = None, ctx: ssl.SSLContext | None = None,
            ) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of one request; no redirect is followed."""
    u = urllib.parse.urlsplit(url)
    assert u.hostname is not None and u.port is not None
    conn: http.client.HTTPConnection = (
        http.client.HTTPSConnection(u.hostname, u.port, timeout=15, context=ctx)
        if u.scheme == "https" else http.client.HTTPConnection(u.hostname, u.port, timeout=15))
    headers = {}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            f"{auth[0]}:{auth[1]}".encode()).decode()
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    try:
        conn.request(method, u.path + (f"?{u.query}" if u.query else ""), body, headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        conn.close()


def add_scram_users(sasl_addr: str) -> None:
    """AlterUserScramCredentials as admin (SASL/PLAIN), with confluent-kafka."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": sasl_addr, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                         "sasl.password": "admin-secret"})
    mechs = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
             "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    ups = [UserScramCredentialUpsertion(u, ScramCredentialInfo(mechs[m], 4096), pw.encode())
           for u, (m, pw) in SCRAM_USERS.items()]
    for fut in admin.alter_user_scram_credentials(ups, request_timeout=20).values():
        fut.result(timeout=20)


def ca_context(pki: TestPki, client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert))
    if client_cert:
        ctx.load_cert_chain(str(pki.client.cert), str(pki.client.key))
    return ctx


def start(tmp: Path, pki: TestPki, extra: dict[str, str]) -> tuple[EmbeddedBroker, int, int, int]:
    sasl, console, metrics = free_port(), free_port(), free_port()
    b = EmbeddedBroker(tmp, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "sasl.jaas.config": ADMIN_JAAS,
        "ssl.keystore.location": str(pki.broker.both),
        "ssl.truststore.location": str(pki.ca.cert),
        "connection.failed.authentication.delay.ms": "20",
        "jocko.console.addr": f"127.0.0.1:{console}",
        "jocko.metrics.addr": f"127.0.0.1:{metrics}",
        **extra,
    })
    b.start()
    return b, sasl, console, metrics


@pytest.fixture(scope="module")
def acl_site(tmp_path_factory: pytest.TempPathFactory, pki: TestPki) -> Iterator[Site]:
    b, sasl, console, metrics = start(tmp_path_factory.mktemp("acl-http"), pki, {
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "jocko.console.ssl.enable": "true",
        "jocko.console.auth": "basic,mtls",
        "jocko.console.read.only": "false",
    })
    try:
        add_scram_users(f"127.0.0.1:{sasl}")
        with Raw(f"127.0.0.1:{sasl}").login("admin", "admin-secret") as c:
            r = c.call(30, 3, {"creations": [
                {"resource_type": TOPIC, "resource_name": "alice-", "resource_pattern_type":
                 PREFIXED, "principal": "User:alice", "host": "*", "operation": op,
                 "permission_type": ALLOW} for op in (CREATE, WRITE)]})
            assert [x.error_code for x in r.results] == [0, 0]
        yield Site(b, sasl, f"https://127.0.0.1:{console}", f"http://127.0.0.1:{metrics}",
                   ca_context(pki))
    finally:
        b.close()


@pytest.fixture(scope="module")
def default_site(tmp_path_factory: pytest.TempPathFactory, pki: TestPki) -> Iterator[Site]:
    b, sasl, console, metrics = start(tmp_path_factory.mktemp("default-http"), pki, {
        "jocko.metrics.ssl.enable": "true",
        "jocko.metrics.auth": "mtls",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/",
    })
    try:
        add_scram_users(f"127.0.0.1:{sasl}")
        yield Site(b, sasl, f"http://127.0.0.1:{console}", f"https://127.0.0.1:{metrics}",
                   ca_context(pki))
    finally:
        b.close()


ALICE = ("alice", SCRAM_USERS["alice"][1])
BOB = ("bob", SCRAM_USERS["bob"][1])


# -- plain HTTP(S) --------------------------------------------------------------------

def test_unauthenticated_requests_get_401_and_a_basic_challenge(acl_site: Site,
                                                                default_site: Site) -> None:
    for url, method in [(acl_site.console + "/", "GET"), (acl_site.console + "/topics", "POST"),
                        (acl_site.metrics + "/metrics", "GET"),
                        (default_site.console + "/topics", "GET")]:
        status, headers, body = acl_site.request(url, method)
        assert status == 401, url
        assert headers["www-authenticate"].startswith('Basic realm="jocko-py"'), url
        assert "kafka_server" not in body and "<h1>" not in body


def test_scram_users_basic_credentials_open_console_and_metrics(acl_site: Site) -> None:
    # the console over HTTPS (the test CA), /metrics over HTTP; both mechanisms' users
    for auth in (ALICE, BOB):
        status, _, body = acl_site.request(acl_site.console + "/topics", auth=auth)
        assert status == 200 and "<h1>Topics</h1>" in body
        status, _, body = acl_site.request(acl_site.metrics + "/metrics", auth=auth)
        assert status == 200 and "kafka_server_replicamanager_partitioncount" in body
    # the broker's JAAS PLAIN user too
    status, _, _ = acl_site.request(acl_site.metrics + "/metrics", auth=("admin", "admin-secret"))
    assert status == 200


def test_wrong_password_is_refused_and_logged_once(acl_site: Site,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "jocko_py.broker.security.http_access")
    for url in (acl_site.console + "/", acl_site.metrics + "/metrics", acl_site.console + "/"):
        status, headers, body = acl_site.request(url, auth=("alice", "not-her-password"))
        assert status == 401 and "Basic" in headers["www-authenticate"]
        assert "<h1>" not in body and "kafka_server" not in body
    status, _, _ = acl_site.request(acl_site.metrics + "/metrics", auth=("nobody", "x"))
    assert status == 401
    lines = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    # one line per server for alice (the second console attempt falls in the interval),
    # one for the unknown user; each names the user and the peer
    assert len([m for m in lines if "'alice'" in m]) == 2, lines
    assert any("'nobody'" in m and "127.0.0.1" in m for m in lines), lines
    assert all("127.0.0.1" in m for m in lines)


def test_https_console_refuses_clients_that_do_not_trust_it(acl_site: Site) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        acl_site.request(acl_site.console + "/", auth=ALICE, ctx=ssl.create_default_context())


def test_console_is_read_only_by_default_on_secured_listeners(default_site: Site) -> None:
    s = default_site
    status, _, body = s.request(s.console + "/topics", auth=ALICE)
    assert status == 200 and "(read-only)" in body and "<form" not in body
    status, _, body = s.request(s.console + "/topics", "POST", auth=ALICE,
                                form={"name": "ro-victim", "partitions": "1"})
    assert status == 403 and "read-only" in body
    assert "ro-victim" not in s.topics()


def test_acls_decide_who_may_create_a_topic(acl_site: Site) -> None:
    s = acl_site
    # bob has no ACL at all: refused, and the topic does not exist afterwards
    status, _, body = s.request(s.console + "/topics", "POST", auth=BOB, form={
        "name": "alice-orders", "partitions": "2", "csrf": s.token(BOB)})
    assert status == 403 and "User:bob is not authorized to CREATE topic alice-orders" in body
    assert "alice-orders" not in s.topics()
    # alice may CREATE topics prefixed alice-, not others
    status, _, body = s.request(s.console + "/topics", "POST", auth=ALICE, form={
        "name": "orders", "partitions": "1", "csrf": s.token(ALICE)})
    assert status == 403 and "orders" not in s.topics()
    status, headers, _ = s.request(s.console + "/topics", "POST", auth=ALICE, form={
        "name": "alice-orders", "partitions": "2", "csrf": s.token(ALICE)})
    assert status == 303 and headers["location"].startswith("/topics/alice-orders")
    assert len(s.broker.broker.image.topics["alice-orders"].partitions) == 2
    # WRITE: alice produces to her topic, bob is refused
    status, headers, _ = s.request(s.console + "/produce", "POST", auth=ALICE, form={
        "topic": "alice-orders", "partition": "1", "value": "v", "csrf": s.token(ALICE)})
    assert status == 303 and "at+offset+0" in headers["location"]
    status, _, body = s.request(s.console + "/produce", "POST", auth=BOB, form={
        "topic": "alice-orders", "value": "v", "csrf": s.token(BOB)})
    assert status == 403 and "WRITE topic alice-orders" in body
    # DELETE: nobody but the super user
    for auth in (ALICE, BOB):
        status, _, body = s.request(s.console + "/topics/alice-orders/delete", "POST",
                                    auth=auth, form={"csrf": s.token(auth)})
        assert status == 403 and "DELETE topic alice-orders" in body
    assert "alice-orders" in s.topics()
    # READ on the group to reset its offsets
    status, _, body = s.request(s.console + "/groups/g1/reset", "POST", auth=BOB,
                                form={"to": "earliest", "csrf": s.token(BOB)})
    assert status == 403 and "User:bob is not authorized to READ group g1" in body
    # bob cannot see alice's topic in the list, nor browse its messages
    status, _, body = s.request(s.console + "/topics", auth=BOB)
    assert status == 200 and "alice-orders" not in body
    status, _, _ = s.request(s.console + "/topics/alice-orders/messages?partition=1", auth=BOB)
    assert status == 403


def test_form_token_missing_wrong_or_another_users_is_refused(acl_site: Site) -> None:
    s = acl_site
    for token in (None, "forged", s.token(BOB)):
        form = {"name": "alice-csrf", "partitions": "1"}
        if token is not None:
            form["csrf"] = token
        status, _, body = s.request(s.console + "/topics", "POST", auth=ALICE, form=form)
        assert status == 403 and "form token" in body, token
    assert "alice-csrf" not in s.topics()


def test_console_client_certificate_is_the_principal(acl_site: Site, pki: TestPki) -> None:
    s = acl_site
    ctx = ca_context(pki, client_cert=True)
    status, _, body = s.request(s.console + "/topics", ctx=ctx)  # no Basic credentials
    assert status == 200 and "<h1>Topics</h1>" in body
    m = re.search(r'name="csrf" value="([^"]+)"', body)
    assert m is not None
    status, _, body = s.request(s.console + "/topics", "POST", ctx=ctx, form={
        "name": "alice-cert", "partitions": "1", "csrf": m.group(1)})
    assert status == 403
    assert "User:CN=client,OU=test,O=jocko,C=US is not authorized to CREATE" in body
    assert "alice-cert" not in s.topics()


def test_metrics_over_mutual_tls(default_site: Site, pki: TestPki) -> None:
    s = default_site
    status, _, body = s.request(s.metrics + "/metrics", ctx=ca_context(pki, True))
    assert status == 200 and "kafka_server_replicamanager_partitioncount" in body
    # without a client certificate the handshake fails (ssl.client.auth=required)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        s.request(s.metrics + "/metrics", auth=ALICE)


def test_console_certificate_reloads_with_the_brokers(tmp_path: Path, pki: TestPki) -> None:
    keystore = tmp_path / "console.pem"
    shutil.copy(pki.broker.both, keystore)
    port = free_port()
    with EmbeddedBroker(tmp_path / "data", overrides={
            "jocko.console.addr": f"127.0.0.1:{port}", "jocko.console.ssl.enable": "true",
            "jocko.console.ssl.keystore.location": str(keystore),
            "jocko.ssl.reload.check.interval.ms": "50"}):
        url = f"https://127.0.0.1:{port}/"
        status, _, body = request(url, ctx=ca_context(pki))
        assert status == 200 and "<h1>Overview</h1>" in body  # all PLAINTEXT: no auth
        shutil.copy(pki.expired_broker.both, keystore)
        os.utime(keystore, (1, 1))
        deadline = time.monotonic() + 10
        while True:  # the next handshakes present the new (expired) certificate
            try:
                request(url, ctx=ca_context(pki))
            except ssl.SSLCertVerificationError as e:
                assert "expired" in str(e)
                break
            assert time.monotonic() < deadline, "the console's certificate was not reloaded"
            time.sleep(0.05)


# -- headless Chromium -----------------------------------------------------------------

def chromium(url: str) -> tuple[str, str]:
    """(DOM, stderr) of a page loaded by headless Chromium."""
    assert CHROMIUM is not None
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--virtual-time-budget=5000", "--dump-dom",
                        url], capture_output=True, text=True, timeout=90)
    return r.stdout, r.stderr


@requires(CHROMIUM is not None, "chromium not installed (make test installs Debian's package)")
def test_browser_needs_credentials(default_site: Site) -> None:
    host = urllib.parse.urlsplit(default_site.console).netloc
    # no credentials: the 401's Basic challenge, which headless Chromium cannot answer
    dom, err = chromium(f"http://{host}/topics")
    assert "ERR_INVALID_AUTH_CREDENTIALS" in err and "<h1>" not in dom
    dom, err = chromium(f"http://alice:wrong@{host}/topics")
    assert "ERR_INVALID_AUTH_CREDENTIALS" in err and "<h1>" not in dom
    # the right ones (in the URL: Chromium sends them as an Authorization header)
    dom, _ = chromium(f"http://alice:{ALICE[1]}@{host}/topics")
    assert "<h1>Topics</h1>" in dom and "(read-only)" in dom


# -- units -----------------------------------------------------------------------------

def test_parse_basic() -> None:
    def b64(s: str) -> str:
        return base64.b64encode(s.encode()).decode()
    assert parse_basic("Basic " + b64("alice:pw:with:colons")) == ("alice", "pw:with:colons")
    assert parse_basic("basic " + b64("ünï:cødé")) == ("ünï", "cødé")
    for bad in ("", "Bearer abc", "Basic", "Basic !!!", "Basic " + b64("no-colon"),
                "Basic " + b64(":pw"), "Basic " + "A" * 5000):
        assert parse_basic(bad) is None, bad


def test_verify_password_against_stored_scram_credentials() -> None:
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        cred = make_credential(mech, "s3cret", iterations=4096)
        assert verify_password(mech, cred, b"s3cret")
        assert not verify_password(mech, cred, b"s3cret ")
        assert not verify_password(mech, cred, b"")


def test_failure_log_is_rate_limited_per_user_and_peer() -> None:
    f = FailureLog(interval_s=10)
    assert f.record("a", "h1", 0.0) == 0
    assert f.record("a", "h1", 1.0) is None
    assert f.record("a", "h1", 2.0) is None
    assert f.record("b", "h1", 2.0) == 0
    assert f.record("a", "h2", 2.0) == 0
    assert f.record("a", "h1", 10.5) == 2  # logged again, with the two suppressed
    small = FailureLog(interval_s=10, max_keys=4)
    for i in range(10):  # a flood of names stays bounded
        small.record(f"u{i}", "h", float(i) / 100)
    assert len(small._last) <= 4


def test_defaults_follow_the_listeners_and_bad_settings_are_config_errors(
        pki: TestPki) -> None:
    plain = build_config(broker_addr="127.0.0.1:9092")
    assert HttpAccessSettings.from_config(plain, "console").modes == frozenset()
    assert not console_read_only(plain)
    secured = {"listeners": "SASL_PLAINTEXT://127.0.0.1:9093"}
    cfg = build_config(broker_addr="127.0.0.1:9092", overrides=secured)
    assert HttpAccessSettings.from_config(cfg, "console").modes == {"basic"}
    assert HttpAccessSettings.from_config(cfg, "metrics").modes == {"basic"}
    assert console_read_only(cfg)
    assert not console_read_only(build_config(
        broker_addr="127.0.0.1:9092", overrides=secured | {"jocko.console.read.only": "false"}))
    assert HttpAccessSettings.from_config(build_config(
        broker_addr="127.0.0.1:9092", overrides=secured | {"jocko.metrics.auth": "none"}),
        "metrics").modes == frozenset()
    tls = {"ssl.keystore.location": str(pki.broker.both),
           "ssl.truststore.location": str(pki.ca.cert), "jocko.console.ssl.enable": "true"}
    s = HttpAccessSettings.from_config(build_config(
        broker_addr="127.0.0.1:9092", overrides=tls | {"jocko.console.auth": "mtls"}), "console")
    assert s.tls is not None and s.tls.client_auth == "required"
    s = HttpAccessSettings.from_config(build_config(broker_addr="127.0.0.1:9092", overrides=tls | {
        "jocko.console.auth": "basic,mtls"}), "console")
    assert s.tls is not None and s.tls.client_auth == "requested"
    for bad, what in [({"jocko.console.auth": "digest"}, "is not none, basic"),
                      ({"jocko.console.auth": "none,basic"}, "is not none, basic"),
                      ({"jocko.console.auth": "mtls"}, "needs jocko.console.ssl.enable"),
                      ({"jocko.console.ssl.enable": "true"}, "needs a key and certificate"),
                      ({"jocko.console.ssl.client.auth": "required"}, "needs jocko.console.ssl"),
                      (tls | {"jocko.console.auth": "mtls",
                              "jocko.console.ssl.client.auth": "none"}, "requested or required"),
                      ]:
        with pytest.raises(ConfigError, match=what):
            HttpAccessSettings.from_config(
                build_config(broker_addr="127.0.0.1:9092", overrides=bad), "console")
