"""Fixtures of the share-group tests: one broker per kind and module ("kafka44", "jocko").

Every test runs once per kind. The Apache Kafka 4.4.0 variants take minutes of JVM
time, past `make test`'s budget: they are deselected at collection (not skipped, which
fails under JOCKO_TEST_STRICT=1) unless JOCKO_SHARE_SUITE=1 (`make share-suite`). The
jocko-py variants always run. The three-broker failover workload (share_cluster.py) runs
on jocko-py in test_share_cluster.py and on Apache Kafka 4.4.0 in `make share-cluster-kafka`;
franz-go's share-group tests run against jocko-py in test_kgo_share.py and side by side
with Kafka in `make kgo-share`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.share.harness import ShareBroker, java_missing, jocko_missing
from tests.support.prereq import missing

KINDS = ["kafka44", "jocko"]
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside `make share-suite`, deselect this directory's Apache Kafka 4.4.0
    variants (the hook sees every collected item: only ours are touched)."""
    if os.environ.get("JOCKO_SHARE_SUITE") == "1":
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        cs = getattr(item, "callspec", None)
        ours = HERE in Path(str(item.path)).parents
        if ours and cs is not None and cs.params.get("share_broker") == "kafka44":
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="module", params=KINDS)
def share_broker(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[ShareBroker]:
    """The broker under test with tests/share/harness.py's BROKER_CONFIG. The jocko
    variant skips (a failure under JOCKO_TEST_STRICT=1), naming the issue-24 piece
    jocko-py still lacks, until it serves share groups."""
    kind = str(request.param)
    if why := java_missing():
        missing(why)
    if kind == "jocko" and (why := jocko_missing()):
        missing(why)
    b = ShareBroker(kind, tmp_path_factory.mktemp(f"share-{kind}")).start()
    try:
        if kind == "jocko" and (why := jocko_missing(b.bootstrap)):
            missing(why)
        yield b
    finally:
        b.stop()
