"""Test certificates, generated per test session with `cryptography` (never committed):
a CA, a broker certificate for 127.0.0.1/localhost, client certificates signed by
the CA, and a client certificate from another (untrusted) CA."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path  # PEM certificate
    key: Path  # PEM private key (PKCS#8, unencrypted)
    both: Path  # key + certificate in one file (Kafka's PEM ssl.keystore.location)


def _name(cn: str, ou: str = "test") -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "jocko"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def _write(dirpath: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
           ) -> Pair:
    c = cert.public_bytes(serialization.Encoding.PEM)
    k = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
    (dirpath / f"{stem}.crt").write_bytes(c)
    (dirpath / f"{stem}.key").write_bytes(k)
    (dirpath / f"{stem}.pem").write_bytes(k + c)
    return Pair(dirpath / f"{stem}.crt", dirpath / f"{stem}.key", dirpath / f"{stem}.pem")


class CA:
    def __init__(self, dirpath: Path, cn: str) -> None:
        self.dir = dirpath
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = _name(cn, "ca")
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.pair = _write(dirpath, cn, self.cert, self.key)

    def issue(self, stem: str, cn: str, *, server: bool = False, ou: str = "test",
              expired: bool = False) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = ((now - datetime.timedelta(days=10), now - datetime.timedelta(days=1))
                      if expired else (now - datetime.timedelta(days=1),
                                       now + datetime.timedelta(days=30)))
        b = (x509.CertificateBuilder().subject_name(_name(cn, ou)).issuer_name(self.name)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(start).not_valid_after(end))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
        return _write(self.dir, stem, b.sign(self.key, hashes.SHA256()), key)


@dataclass(frozen=True)
class TestPki:
    __test__ = False  # not a pytest class

    ca: Pair
    broker: Pair
    client: Pair  # subject CN=client,OU=test,O=jocko,C=US
    other_ca: Pair
    untrusted_client: Pair
    expired_client: Pair
    expired_broker: Pair


def make_pki(dirpath: Path) -> TestPki:
    dirpath.mkdir(parents=True, exist_ok=True)
    ca = CA(dirpath, "test-ca")
    other = CA(dirpath, "other-ca")
    return TestPki(
        ca=ca.pair,
        broker=ca.issue("broker", "localhost", server=True),
        client=ca.issue("client", "client"),
        other_ca=other.pair,
        untrusted_client=other.issue("untrusted", "mallory"),
        expired_client=ca.issue("expired-client", "old", expired=True),
        expired_broker=ca.issue("expired-broker", "localhost", server=True, expired=True),
    )
