"""Broker process lifecycle: the start-up line, and graceful shutdown on SIGTERM and
SIGINT (exit code 0, every log flushed and closed, the clean-shutdown marker written,
the data intact after a restart)."""

from __future__ import annotations

import re
import signal

import pytest

from jocko_py.client import Client
from jocko_py.protocol import records as rb
from tests.support.broker import BrokerProcess


def test_start_up_line_names_listening_and_advertised_address(broker: BrokerProcess) -> None:
    log = broker.log_path.read_text()
    m = re.search(
        r"listening on 127\.0\.0\.1:(\d+), advertised as 127\.0\.0\.1:(\d+), data in (\S+),", log
    )
    assert m, log
    assert int(m.group(1)) == broker.port and int(m.group(2)) == broker.port
    assert m.group(3) == str(broker.data_dir)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_cleanly_and_keeps_every_acknowledged_record(
    broker: BrokerProcess, sig: signal.Signals
) -> None:
    with Client(broker.bootstrap) as c:
        c.create_topic("lifecycle", 2)
        for i in range(50):
            recs = [rb.NewRecord(b"k%d" % i, b"v%d-%d" % (i, j), (), 1000 + i) for j in range(3)]
            c.produce("lifecycle", i % 2, rb.build_batch(recs), acks=1)
    marker = broker.data_dir / ".kafka_cleanshutdown"
    assert not marker.exists(), "the marker is removed while the broker runs"

    broker.stop_gracefully(timeout=15, sig=sig)
    assert marker.exists(), "a clean shutdown writes .kafka_cleanshutdown"
    assert "stopped cleanly" in broker.log_tail(20)

    broker.start()
    assert "loaded 2 logs" in broker.log_tail(30) and "after a clean shutdown" in broker.log_tail(30)
    with Client(broker.bootstrap) as c:
        for p in (0, 1):
            offset, got = 0, []
            while offset < 75:
                resp = c.fetch("lifecycle", p, offset)
                buf = bytes(resp.records or b"")
                recs = [
                    r
                    for pos, h in rb.iter_batches(buf, validate_crc=True, allow_partial_tail=True)
                    for r in rb.decode_records(buf[pos : pos + h.size], h)
                ]
                assert recs, f"partition {p} stops at {offset}"
                got.extend(recs)
                offset += len(recs)
            assert resp.high_watermark == 75
            assert [r.value for r in got] == [
                b"v%d-%d" % (i, j) for i in range(p, 50, 2) for j in range(3)
            ]
