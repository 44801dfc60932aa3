"""One launcher for a broker process and one for a cluster (issue 23): a test starts a
`jocko-py broker` through `tests/support/broker.py`'s `BrokerProcess` and a cluster
through `tests/support/cluster.py`'s `Cluster`. Read from the tests' code (in process):
a command line naming the broker subcommand or the quorum voters, or the library's
`BrokerCluster`, outside those launchers is listed here with its reason, or it fails."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

# the launchers themselves
LAUNCHERS = {"support/broker.py", "support/cluster.py"}
# tests of the command line itself, which run `jocko-py broker ...` as a user would
CLI_TESTS = {
    "broker/test_cli_errors.py",      # mistakes on the command line: one line, non-zero
    "broker/test_dir_lock.py",        # a second broker on a data dir in use
    "broker/test_sample_configs.py",  # the sample --config files
    "broker/test_storage_cli.py",     # a stored node id / cluster id refused
    "cluster/test_shards_unit.py",    # --shards mistakes
    "cluster_e2e/test_shards.py",     # --shards: one command, two processes
    "cluster_e2e/test_cluster_links.py",  # a refused start (the cluster secret file)
    "security/test_sasl_protocol.py",  # a refused start (security settings)
    "docs/test_install.py",           # the installed `jocko-py` script
}
# the library's cluster (jocko_py.embedded.BrokerCluster), where it is what is tested
# (the plugin's tests reach it through its `kafka_cluster` fixture)
PLUGIN_TESTS: set[str] = set()


def _findings() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel in LAUNCHERS or rel == "test_launchers.py":
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            what = None
            if isinstance(node, ast.Constant) and node.value == "--controller-quorum-voters":
                what = "quorum voters on a command line"
            elif isinstance(node, (ast.List, ast.Tuple, ast.Call)):
                # `broker` then a flag, in a list or among a call's arguments
                elts = node.args if isinstance(node, ast.Call) else node.elts
                words = [e.value if isinstance(e, ast.Constant) else None for e in elts]
                if any(a == "broker" and isinstance(b, str) and b.startswith("--")
                       for a, b in zip(words, words[1:], strict=False)):
                    what = "a `broker` command line"
            elif isinstance(node, ast.Name) and node.id == "BrokerCluster" or \
                    isinstance(node, ast.alias) and node.name.endswith("BrokerCluster"):
                what = "the library's BrokerCluster"
            if what:
                found.setdefault(rel, set()).add(what)
    return found


def test_brokers_and_clusters_are_started_by_the_launchers() -> None:
    found = _findings()
    cli = {f for f, w in found.items() if w - {"the library's BrokerCluster"}}
    plugin = {f for f, w in found.items() if "the library's BrokerCluster" in w}
    assert cli - CLI_TESTS == set(), \
        "start brokers with tests/support/broker.py or cluster.py: " + \
        str({f: found[f] for f in cli - CLI_TESTS})
    assert plugin - PLUGIN_TESTS == set(), \
        "start clusters with tests/support/cluster.py: " + \
        str({f: found[f] for f in plugin - PLUGIN_TESTS})
