"""What protects this broker's raft and gossip ports, from its config (``LinkSecurity``
for ``ClusterNode``; the wire formats are in cluster/linkauth.py).

* ``jocko.cluster.secret.file``: the brokers' shared secret (one key per line, the
  first signs, every line verifies). Raft connections then start with a mutual
  challenge-response and carry a tag on every frame; gossip datagrams carry a tag, a
  timestamp (±30 s) and a nonce (replays dropped).
* ``jocko.gossip.encrypt=true`` (needs the secret): gossip datagrams are also encrypted
  (AES-256-GCM, key derived from the secret).
* ``jocko.raft.ssl.enable=true``: mutual TLS on the raft port with the inter-broker
  listener's PEM settings (``ssl.keystore.location`` or ``ssl.keystore.certificate.chain``
  + ``ssl.keystore.key``, ``ssl.key.password``, ``ssl.truststore.location`` or
  ``ssl.truststore.certificates``, ``ssl.enabled.protocols``, ``ssl.cipher.suites``,
  each also as ``listener.name.<inter-broker listener>.<setting>``); a client
  certificate is required whatever ``ssl.client.auth`` says, and the dialler checks
  the listener's host name unless ``ssl.endpoint.identification.algorithm`` is empty.

Nothing set: the ports are open as before, and a cluster-mode broker says so once.
Certificates and keys are read at start-up (a change needs a restart).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import ssl

from jocko_py.broker.config import BrokerConfig, ConfigError
from jocko_py.broker.security.tls import _PROTOCOLS, TlsSettings, _pem_file
from jocko_py.cluster.linkauth import GossipCodec, LinkSecurity, SecretError, load_secret_file

log = logging.getLogger("jocko_py.broker.security.cluster_links")


def _client_context(tls: TlsSettings, check_hostname: bool) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    versions = sorted(_PROTOCOLS[p] for p in tls.protocols)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    password = tls.key_password or None
    try:
        if tls.keystore_location:
            ctx.load_cert_chain(tls.keystore_location, password=password)
        else:
            with _pem_file(tls.keystore_chain) as chain, _pem_file(tls.keystore_key) as key:
                ctx.load_cert_chain(chain, key, password=password)
        if tls.truststore_location:
            ctx.load_verify_locations(cafile=tls.truststore_location)
        else:
            ctx.load_verify_locations(cadata=tls.truststore_certificates.replace("\\n", "\n"))
        if tls.ciphers:
            ctx.set_ciphers(":".join(c.strip() for c in tls.ciphers.split(",")))
    except (OSError, ssl.SSLError, ValueError) as e:
        raise ConfigError(f"jocko.raft.ssl.enable: cannot load the TLS key, certificates or "
                          f"ciphers of listener {tls.listener}: {e}") from e
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def raft_tls(config: BrokerConfig) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server, client) contexts for mutual TLS on the raft port; ConfigError if the
    inter-broker listener's key, certificate or truststore is missing or does not load."""
    name = config.inter_broker_listener
    tls = TlsSettings.from_config(config, name)
    if not (tls.truststore_location or tls.truststore_certificates):
        raise ConfigError("jocko.raft.ssl.enable=true needs a truststore for the brokers' "
                          "certificates: ssl.truststore.location or ssl.truststore.certificates "
                          f"(or listener.name.{name.lower()}.ssl.truststore.*)")
    server = dataclasses.replace(tls, client_auth="required").build()
    key = "ssl.endpoint.identification.algorithm"
    alg = config.properties.get(f"listener.name.{name.lower()}.{key}",
                                config.properties.get(key, "https"))
    return server, _client_context(tls, alg.strip().lower() == "https")


def cluster_link_security(config: BrokerConfig) -> LinkSecurity:
    """The cluster links' protection from the config; ConfigError (one line) when the
    secret file or the TLS files cannot be used. Warns once when nothing is set."""
    path = config.get("jocko.cluster.secret.file").strip()
    secret = None
    if path:
        try:
            secret = load_secret_file(path)
        except SecretError as e:
            raise ConfigError(str(e)) from None
        with contextlib.suppress(OSError):
            if os.stat(path).st_mode & 0o077:
                log.warning("jocko.cluster.secret.file %s can be read by other users than "
                            "its owner (chmod 600 it)", path)
    encrypt = config.bool("jocko.gossip.encrypt")
    if encrypt and secret is None:
        raise ConfigError("jocko.gossip.encrypt=true needs jocko.cluster.secret.file (the "
                          "encryption key is derived from the cluster secret)")
    if encrypt and secret is not None:
        try:
            GossipCodec(secret, encrypt=True)
        except SecretError as e:
            raise ConfigError(str(e)) from None
    server = client = None
    if config.bool("jocko.raft.ssl.enable"):
        server, client = raft_tls(config)
    sec = LinkSecurity(secret, encrypt, server, client)
    if secret is not None:
        log.info("cluster links: raft and gossip authenticated with the cluster secret "
                 "(%d key(s), signing key id %s)%s%s", len(secret.keys),
                 secret.signing.key_id.hex(), ", gossip encrypted" if encrypt else "",
                 ", raft over mutual TLS" if server is not None else "")
    else:
        ports = (f"the gossip port {config.gossip_addr} is" if server is not None else
                 f"the raft port {config.raft_addr} and the gossip port "
                 f"{config.gossip_addr} are")
        log.warning(
            "%s not authenticated: any process that reaches %s can %s; set "
            "jocko.cluster.secret.file on every broker (jocko-py cluster gen-secret makes one)",
            ports, "it" if server is not None else "them",
            "change the membership" if server is not None else
            "vote, append to the metadata log or change the membership")
    return sec
