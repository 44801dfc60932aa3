"""Addresses a broker listens on: one wording for a listen that fails (a port in use, a
host name that does not resolve), naming what was to listen there, for every listener
(Kafka, raft, gossip, console, metrics)."""

from __future__ import annotations

import errno
import socket


def bind_error(what: str, host: str, port: int, err: OSError) -> OSError:
    """An OSError (same errno) whose message names the listener and its address:
    ``cannot listen on 127.0.0.1:9092 (Kafka listener PLAINTEXT): address already in use``."""
    if isinstance(err, socket.gaierror):
        reason = f"host {host!r} does not resolve ({err.strerror or err})"
    elif err.errno == errno.EADDRINUSE:
        reason = "address already in use"
    elif err.errno == errno.EADDRNOTAVAIL:
        reason = f"{host} is not an address of this machine"
    elif err.errno == errno.EACCES:
        reason = f"permission denied (port {port} needs privileges)"
    else:
        reason = err.strerror or str(err)
    return OSError(err.errno, f"cannot listen on {host}:{port} ({what}): {reason}")
