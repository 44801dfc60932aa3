"""TLS: client certificates (required / requested), untrusted and expired
certificates refused, the principal from the subject and mapping rules, protocol
versions, and certificate reload without a restart."""

from __future__ import annotations

import asyncio
import shutil
import ssl
from pathlib import Path

import pytest

from jocko_py.broker.config import ConfigError, build_config
from jocko_py.broker.security.tls import (
    CertificateReloader,
    TlsSettings,
    map_principal,
    parse_mapping_rules,
    peer_principal,
)
from tests.security.certs import TestPki
from tests.security.conftest import SecureBroker
from tests.security.raw import Raw

pytestmark = pytest.mark.timeout(60)
API_VERSIONS = (18, 3, {"client_software_name": "t", "client_software_version": "1"})


def test_mtls_listener_serves_a_trusted_client_certificate(secure_broker: SecureBroker) -> None:
    pki = secure_broker.pki
    with Raw(secure_broker.addr("MTLS"), ca=str(pki.ca.cert),
             cert=(str(pki.client.cert), str(pki.client.key))) as c:
        assert c.call(*API_VERSIONS).error_code == 0


@pytest.mark.parametrize("which", ["none", "untrusted", "expired"])
def test_mtls_listener_refuses_missing_untrusted_or_expired_certificates(
        secure_broker: SecureBroker, which: str) -> None:
    pki = secure_broker.pki
    pair = {"none": None, "untrusted": pki.untrusted_client, "expired": pki.expired_client}[which]
    cert = (str(pair.cert), str(pair.key)) if pair else None
    try:
        with Raw(secure_broker.addr("MTLS"), ca=str(pki.ca.cert), cert=cert) as c:
            # TLS 1.3: the server's verdict on the client certificate arrives after the
            # client's handshake returns; the first read sees it
            assert c.call(*API_VERSIONS) is None
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        pass


def test_ssl_listener_with_requested_auth_accepts_no_certificate(
        secure_broker: SecureBroker) -> None:
    with Raw(secure_broker.addr("SSL"), ca=str(secure_broker.pki.ca.cert)) as c:
        assert c.call(*API_VERSIONS).error_code == 0


def test_client_refuses_a_broker_certificate_from_an_unknown_ca(
        secure_broker: SecureBroker) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        Raw(secure_broker.addr("SSL"), ca=str(secure_broker.pki.other_ca.cert))


def test_kafka_python_with_untrusted_ca_reaches_nothing(secure_broker: SecureBroker) -> None:
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaConsumer(bootstrap_servers=secure_broker.addr("SSL"), security_protocol="SSL",
                      ssl_cafile=str(secure_broker.pki.other_ca.cert),
                      request_timeout_ms=3000, api_version_auto_timeout_ms=3000)


# ------------------------------------------------------------------ principals


def test_mapping_rules_follow_kafka() -> None:
    dn = "CN=client,OU=test,O=jocko,C=US"
    assert map_principal(parse_mapping_rules("DEFAULT"), dn) == dn
    rules = parse_mapping_rules("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L, DEFAULT")
    assert map_principal(rules, dn) == "client@test"
    assert map_principal(rules, "CN=x") == "CN=x"  # falls through to DEFAULT
    assert map_principal(parse_mapping_rules("RULE:^CN=([a-z]+),.*$/$1/U"), dn) == "CLIENT"
    assert map_principal(parse_mapping_rules(r"RULE:^CN=(.*)$/a\/b$1/"), "CN=z") == "a/bz"
    with pytest.raises(ValueError):
        map_principal(parse_mapping_rules("RULE:^OU=.*$/x/"), dn)
    with pytest.raises(ConfigError):
        parse_mapping_rules("RULE:unterminated")


def _tls_props(pki: TestPki, **extra: str) -> dict[str, str]:
    return {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(pki.broker.both),
            "ssl.truststore.location": str(pki.ca.cert), **extra}


async def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext
                     ) -> tuple[object, dict[str, object]]:
    """Serve one TLS connection in-process; (the server's ssl object, the peer
    certificate the client saw)."""
    seen: list[object] = []

    async def on(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(writer.get_extra_info("ssl_object"))
        writer.write(b"x")
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(on, "127.0.0.1", 0, ssl=server_ctx)
    port = srv.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
        await reader.read(1)
        cert = writer.get_extra_info("peercert")
        writer.close()
    finally:
        srv.close()
    return seen[0], cert


def _client_ctx(pki: TestPki, cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert))
    if cert:
        ctx.load_cert_chain(str(pki.client.cert), str(pki.client.key))
    return ctx


def test_principal_is_the_rfc2253_subject(pki: TestPki, tmp_path: Path) -> None:
    cfg = build_config(data_dir=str(tmp_path), overrides=_tls_props(
        pki, **{"ssl.client.auth": "required"}))
    reloader = CertificateReloader(TlsSettings.from_config(cfg, "SSL"))
    sslobj, _ = asyncio.run(_handshake(reloader.server_context, _client_ctx(pki)))
    assert peer_principal(sslobj, parse_mapping_rules("DEFAULT")) == \
        "User:CN=client,OU=test,O=jocko,C=US"


def test_tls_versions_follow_ssl_enabled_protocols(pki: TestPki, tmp_path: Path) -> None:
    cfg = build_config(data_dir=str(tmp_path), overrides=_tls_props(
        pki, **{"ssl.enabled.protocols": "TLSv1.2"}))
    server = TlsSettings.from_config(cfg, "SSL").build()
    client = _client_ctx(pki, cert=False)
    client.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises((ssl.SSLError, ConnectionResetError)):
        asyncio.run(_handshake(server, client))
    client.minimum_version = ssl.TLSVersion.TLSv1_2
    client.maximum_version = ssl.TLSVersion.TLSv1_2
    asyncio.run(_handshake(server, client))


def test_certificates_reload_without_restart(pki: TestPki, tmp_path: Path) -> None:
    keystore = tmp_path / "keystore.pem"
    shutil.copy(pki.broker.both, keystore)
    cfg = build_config(data_dir=str(tmp_path), overrides=_tls_props(
        pki, **{"ssl.keystore.location": str(keystore)}))
    reloader = CertificateReloader(TlsSettings.from_config(cfg, "SSL"))
    client = _client_ctx(pki, cert=False)
    _, before = asyncio.run(_handshake(reloader.server_context, client))
    assert not reloader.check()  # nothing changed
    # an expired certificate replaces it: the next handshake must present it (and fail)
    shutil.copy(pki.expired_broker.both, keystore)
    import os
    os.utime(keystore, (1, 1))
    assert reloader.check()
    with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
        asyncio.run(_handshake(reloader.server_context, client))
    # a file that does not load keeps the previous certificate
    keystore.write_text("garbage")
    os.utime(keystore, (2, 2))
    assert not reloader.check()
    shutil.copy(pki.broker.both, keystore)
    os.utime(keystore, (3, 3))
    assert reloader.check()
    _, after = asyncio.run(_handshake(reloader.server_context, client))
    assert after["serialNumber"] == before["serialNumber"]


@pytest.mark.parametrize(("props", "message"), [
    ({"ssl.keystore.location": ""}, "needs a key and certificate"),
    ({"ssl.keystore.type": "JKS"}, "only ssl.keystore.type=PEM"),
    ({"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ({"ssl.client.auth": "sometimes"}, "ssl.client.auth"),
    ({"ssl.keystore.location": "/nonexistent.pem"}, "cannot load"),
])
def test_bad_tls_settings_are_one_line_config_errors(
        pki: TestPki, tmp_path: Path, props: dict[str, str], message: str) -> None:
    cfg = build_config(data_dir=str(tmp_path), overrides=_tls_props(pki, **props))
    with pytest.raises(ConfigError, match=message):
        TlsSettings.from_config(cfg, "SSL").build()


def test_inline_pem_keystore_and_truststore(pki: TestPki, tmp_path: Path) -> None:
    cfg = build_config(data_dir=str(tmp_path), overrides={
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.certificate.chain": pki.broker.cert.read_text(),
        "ssl.keystore.key": pki.broker.key.read_text(),
        "ssl.truststore.certificates": pki.ca.cert.read_text(),
        "ssl.client.auth": "required"})
    server = CertificateReloader(TlsSettings.from_config(cfg, "SSL")).server_context
    sslobj, _ = asyncio.run(_handshake(server, _client_ctx(pki)))
    assert peer_principal(sslobj, parse_mapping_rules("")).startswith("User:CN=client")
