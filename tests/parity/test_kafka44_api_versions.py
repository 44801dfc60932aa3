"""jocko-py's ApiVersions against Apache Kafka 4.4.0's (issue 21).

One Apache Kafka 4.4.0 node (KRaft, `kafka-storage format --standalone`, see
tests/support/kafka44.py) and the module's jocko-py broker each answer
ApiVersions (both answers are kept in build/api-versions.json, from which
tools/api_table.py writes the README's API table); every API key a Kafka broker
offers its clients must be served by jocko-py up to the same newest version (and from the same oldest one), and
jocko-py offers nothing Kafka does not, unless `NOT_YET` names the key with
jocko-py's current version and the reason; the same for the supported features
(`FEATURES_NOT_YET`). Keys Kafka serves only on its
controller listener are left aside (jocko-py may still list them while that is
being changed). An entry that no longer matches jocko-py fails too, so the list
stays the truth.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jocko_py.client import Client
from jocko_py.protocol import messages
from jocko_py.protocol.messages._generated import APIS
from tests.support import kafka44
from tests.support.e2e import TargetBroker

# key -> (jocko-py's newest version, None when not served; why it differs from Kafka 4.4.0)
NOT_YET: dict[int, tuple[int | None, str]] = {
    34: (None, "AlterReplicaLogDirs: moving a replica between log dirs (future replicas)"),
    38: (None, "delegation tokens"),
    39: (None, "delegation tokens"),
    40: (None, "delegation tokens"),
    41: (None, "delegation tokens"),
    64: (None, "UnregisterBroker"),
    78: (None, "share groups (KIP-932)"),
    79: (None, "share groups (KIP-932)"),
    80: (None, "AddRaftVoter: the quorum is not reconfigurable (KIP-853)"),
    81: (None, "RemoveRaftVoter: the quorum is not reconfigurable (KIP-853)"),
    83: (None, "share group state (KIP-932)"),
    84: (None, "share group state (KIP-932)"),
    85: (None, "share group state (KIP-932)"),
    86: (None, "share group state (KIP-932)"),
    87: (None, "share group state (KIP-932)"),
    90: (None, "share group offsets (KIP-932)"),
    91: (None, "share group offsets (KIP-932)"),
    92: (None, "share group offsets (KIP-932)"),
    94: (None, "UnregisterController"),
}


# feature -> (jocko-py's supported range, None when unknown to it; why it differs)
FEATURES_NOT_YET: dict[str, tuple[tuple[int, int] | None, str]] = {
    "kraft.version": ((0, 0), "kraft.version 1 (KIP-853 dynamic quorums)"),
}


def _controller_only(key: int) -> bool:
    try:
        listeners = messages._module(APIS[key][1]).LISTENERS
    except KeyError:
        return False
    return "broker" not in listeners


def _api_versions(bootstrap: str) -> Any:
    with Client(bootstrap, timeout=10) as c:
        # v4: every supported feature (v3 leaves out those whose minimum level is 0)
        return c.request(18, 4, {"client_software_name": "jocko-py-parity",
                                 "client_software_version": "1"})


def _ranges(resp: Any) -> dict[int, tuple[int, int]]:
    assert resp.error_code == 0
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
            if not _controller_only(int(k.api_key))}


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kafka44.ApacheKafka44]:
    why = kafka44.missing()
    if why:
        pytest.skip(why)
    tmp: Path = tmp_path_factory.mktemp("kafka44")
    k = kafka44.ApacheKafka44(tmp / "data")
    k.start()
    try:
        k.wait_ready()
        yield k
    finally:
        k.stop(timeout=20)


@pytest.fixture(scope="module")
def both(kafka: kafka44.ApacheKafka44, target: TargetBroker) -> tuple[Any, Any]:
    theirs, ours = _api_versions(kafka.bootstrap), _api_versions(target.bootstrap)
    record(theirs, ours)
    return theirs, ours


#: where the two answers are kept for tools/api_table.py (the README's API table)
RESULTS = Path(os.environ.get("JOCKO_API_TABLE_RESULTS",
                              Path(__file__).resolve().parents[2] / "build" / "api-versions.json"))


def record(theirs: Any, ours: Any) -> None:
    """Both ApiVersions answers (client listener keys), with NOT_YET's reasons."""
    def keys(r: Any) -> dict[str, list[int]]:
        return {str(k): list(v) for k, v in _ranges(r).items()}

    def feats(r: Any) -> dict[str, list[int]]:
        return {f.name: [int(f.min_version), int(f.max_version)] for f in r.supported_features}

    data = {
        "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "kafka": {"apis": keys(theirs), "features": feats(theirs)},
        "jocko": {"apis": keys(ours), "features": feats(ours)},
        "names": {str(k): messages.api_name(k) for k in set(_ranges(theirs)) | set(_ranges(ours))},
        "not_yet": {str(k): why for k, (_, why) in NOT_YET.items()},
        "features_not_yet": {k: why for k, (_, why) in FEATURES_NOT_YET.items()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def test_every_api_key_is_served_up_to_kafka_44s_newest_version(both: tuple[Any, Any]) -> None:
    theirs, ours = (_ranges(r) for r in both)
    wrong = []
    for key in sorted(set(theirs) | set(ours)):
        mine = ours[key][1] if key in ours else None
        kafka_max = theirs[key][1] if key in theirs else None
        name = messages.api_name(key)
        if key in NOT_YET:
            expected, why = NOT_YET[key]
            if mine != expected:
                wrong.append(f"{name} ({key}): NOT_YET says jocko-py serves up to {expected} "
                             f"({why}), it serves {mine}: update the entry")
            elif mine == kafka_max:
                wrong.append(f"{name} ({key}) matches Kafka ({mine}): drop it from NOT_YET")
            continue
        if mine != kafka_max:
            wrong.append(f"{name} ({key}): jocko-py {mine}, Apache Kafka 4.4.0 {kafka_max}")
    assert not wrong, "\n".join(wrong)


def test_oldest_versions_are_kafka_44s(both: tuple[Any, Any]) -> None:
    """Where both serve a key, from the same oldest version (Kafka 4.x dropped many)."""
    theirs, ours = (_ranges(r) for r in both)
    wrong = [f"{messages.api_name(k)} ({k}): jocko-py from v{ours[k][0]}, "
             f"Apache Kafka 4.4.0 from v{theirs[k][0]}"
             for k in sorted(set(theirs) & set(ours)) if ours[k][0] != theirs[k][0]]
    assert not wrong, "\n".join(wrong)


def test_supported_features_are_kafka_44s(both: tuple[Any, Any]) -> None:
    """ApiVersions' supported features: Kafka 4.4.0's ranges, or FEATURES_NOT_YET."""
    theirs, ours = ({f.name: (int(f.min_version), int(f.max_version))
                     for f in r.supported_features} for r in both)
    wrong = []
    for name in sorted(set(theirs) | set(ours)):
        mine = ours.get(name)
        if name in FEATURES_NOT_YET:
            expected, why = FEATURES_NOT_YET[name]
            if mine != expected:
                wrong.append(f"{name}: FEATURES_NOT_YET says {expected} ({why}), jocko-py "
                             f"supports {mine}: update the entry")
            elif mine == theirs.get(name):
                wrong.append(f"{name} matches Kafka ({mine}): drop it from FEATURES_NOT_YET")
        elif mine != theirs.get(name):
            wrong.append(f"{name}: jocko-py {mine}, Apache Kafka 4.4.0 {theirs.get(name)}")
    assert not wrong, "\n".join(wrong)
