"""The compatibility matrix (client x feature) as the tests that verify it.

Each rule names a feature, a client and the tests (a regular expression on the pytest
node id) that show it. During every run the root conftest records the outcome of every
test a rule matches into ``build/compat-results.json`` (``JOCKO_COMPAT_RESULTS``
overrides the path; results of earlier partial runs are kept for cells this run did
not touch); ``tools/compat_matrix.py`` renders that file into the README's generated
table. A cell is "yes" when every matching test passed in the run that recorded it,
"FAIL" when one failed, "-" when no test covers it.
"""

from __future__ import annotations

import re

CLIENTS = ["kafka-python", "aiokafka", "confluent-kafka", "kcat", "Java", "franz-go",
           "Sarama", "kafka-go", "Spark"]

# parameter values of the tests -> client column
_KIND = {"kafka-python": "kafka-python", "kafka_python": "kafka-python", "aiokafka": "aiokafka",
         "confluent": "confluent-kafka",
         "kcat": "kcat", "java": "Java", "franz": "franz-go", "sarama": "Sarama",
         "kafkago": "kafka-go", "3.9": "Java", "4.x": "Java"}

PRODUCE = "produce and read back byte for byte, every codec"
TIMES = "offsets by timestamp"
RESTART = "read everything again after a broker restart"
GROUP = "consumer group: share partitions, leave and kill, commits, resume"
STATIC = "static membership keeps partitions across a restart"
COOP = "cooperative-sticky incremental rebalance"
KIP848 = "KIP-848 consumer protocol (group.protocol=consumer)"
MIGRATE = "KIP-848 online migration with classic members"
LEADER_KILL = "3 brokers: acks=all stream across a partition leader SIGKILL"
COORD_KILL = "3 brokers: group member survives a coordinator SIGKILL"
SESSIONS = "incremental fetch sessions (KIP-227), seen on the wire"
TLS_SASL = "TLS and SASL (PLAIN, SCRAM) round trips; bad credentials refused"
TXN = "transactions: commit/abort, read_committed never sees aborted data"
TXN_ACL = "transactional-id ACLs: WRITE commits, none gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED"

# (feature, client or None to take it from the test's parameter, node id pattern)
RULES: list[tuple[str, str | None, str]] = [
    (PRODUCE, "kafka-python", r"tests/clients/test_kafka_python\.py::test_produce_and_read_back"),
    (PRODUCE, "aiokafka", r"tests/clients/test_aiokafka\.py::test_produce_and_read_back"),
    (PRODUCE, "confluent-kafka", r"tests/clients/test_confluent_kafka\.py::test_produce_and_read_back"),
    (PRODUCE, "kcat", r"tests/clients/test_kcat\.py::test_produce_and_read_back"),
    (PRODUCE, "Java", r"tests/clients/test_java_clients\.py::test_produce_all_codecs"),
    (PRODUCE, None, r"tests/clients/test_go_clients\.py::test_produce_and_read_back\["),
    (PRODUCE, "Spark", r"tests/spark/test_batch_read\.py::test_compressed_batches_both_ways"),
    (TIMES, "kafka-python", r"tests/clients/test_kafka_python\.py::test_offsets_for_times"),
    (TIMES, "aiokafka", r"tests/clients/test_aiokafka\.py::test_offsets_for_times"),
    (TIMES, "confluent-kafka", r"tests/clients/test_confluent_kafka\.py::test_offsets_for_times"),
    (TIMES, "kcat", r"tests/clients/test_kcat\.py::test_offsets_by_timestamp"),
    (TIMES, "Java", r"tests/clients/test_java_clients\.py::test_offsets_for_times"),
    (TIMES, "Spark", r"tests/spark/test_batch_read\.py::test_offset_ranges_by_timestamp"),
    (RESTART, "kafka-python", r"tests/clients/test_kafka_python\.py::test_read_again_after"),
    (RESTART, "aiokafka", r"tests/clients/test_aiokafka\.py::test_read_again_after"),
    (RESTART, "confluent-kafka", r"tests/clients/test_confluent_kafka\.py::test_read_again_after"),
    (RESTART, "kcat", r"tests/clients/test_kcat\.py::test_read_again_after"),
    (RESTART, "Java", r"tests/clients/test_java_clients\.py::test_read_again_after"),
    (RESTART, None, r"tests/clients/test_go_clients\.py::test_read_again_after_restart\["),
    (RESTART, "Spark", r"tests/spark/test_streaming\.py::test_running_query_survives_broker_restart"),
    (GROUP, None, r"tests/groups/test_group_clients\.py::test_group_scenario\["),
    (GROUP, None, r"tests/clients/test_go_clients\.py::test_consumer_group_two_members\["),
    (STATIC, None, r"tests/groups/test_static_cooperative\.py::test_static_member_restart"),
    (COOP, None, r"tests/groups/test_static_cooperative\.py::test_cooperative_sticky"),
    (KIP848, None, r"tests/groups/test_consumer_protocol\.py::test_consumer_protocol_group\["),
    (KIP848, "Java", r"tests/groups/test_consumer_protocol\.py::test_java_consumer_protocol_regex"),
    (KIP848, "confluent-kafka", r"tests/groups/test_consumer_protocol\.py::test_consumer_group_survives"),
    (KIP848, "franz-go", r"tests/groups/test_consumer_protocol\.py::test_franz_go_server_side"),
    (MIGRATE, "Java", r"tests/groups/test_consumer_protocol\.py::test_classic_group_upgraded"),
    (MIGRATE, "kafka-python", r"tests/groups/test_consumer_protocol\.py::test_classic_group_upgraded"),
    (LEADER_KILL, "kafka-python", r"tests/cluster_e2e/test_clients_cluster\.py::test_kafka_python_leader_kill"),
    (LEADER_KILL, "aiokafka", r"tests/cluster_e2e/test_clients_cluster\.py::test_aiokafka_leader_kill"),
    (LEADER_KILL, "kcat", r"tests/cluster_e2e/test_clients_cluster\.py::test_kcat_leader_kill"),
    (LEADER_KILL, "confluent-kafka", r"tests/cluster_e2e/test_replication\.py::test_leader_kill_loses"),
    (LEADER_KILL, None, r"tests/cluster_e2e/test_java_cluster\.py::test_java_leader_kill\["),
    (LEADER_KILL, None, r"tests/cluster_e2e/test_go_cluster\.py::test_go_leader_kill\["),
    (LEADER_KILL, "Spark", r"tests/cluster_e2e/test_spark_cluster\.py::test_file_sink_equals"),
    (COORD_KILL, None, r"tests/cluster_e2e/test_clients_cluster\.py::test_group_member_survives"),
    (COORD_KILL, None, r"tests/cluster_e2e/test_java_cluster\.py::test_java_group_member_survives"),
    (COORD_KILL, None, r"tests/cluster_e2e/test_go_cluster\.py::test_go_group_member_survives"),
    (SESSIONS, "kafka-python", r"tests/parity/test_fetch_sessions\.py::test_kafka_python_consumer"),
    (SESSIONS, "Java", r"tests/parity/test_fetch_sessions\.py::test_java_consumer_uses"),
    (TLS_SASL, "confluent-kafka", r"tests/security/test_security_clients\.py::test_confluent_"),
    (TLS_SASL, "kafka-python", r"tests/security/test_security_clients\.py::test_kafka_python_"),
    (TLS_SASL, "aiokafka", r"tests/security/test_security_clients\.py::test_aiokafka_round_trip"),
    (TLS_SASL, "kcat", r"tests/security/test_security_clients\.py::test_kcat_round_trip"),
    (TLS_SASL, "Java", r"tests/security/test_java_client\.py::test_java_"),
    (TLS_SASL, "franz-go", r"tests/security/test_go_client\.py::test_franz_go_"),
    (TLS_SASL, None, r"tests/security/test_go_client\.py::test_sarama_and_kafka_go_round_trip\["),
    (TXN, None, r"tests/transactions/test_read_committed_clients\.py::test_read_committed\["),
    (TXN, "confluent-kafka", r"tests/transactions/test_confluent_transactions\.py::test_commit_and_abort"),
    (TXN, "Java", r"tests/transactions/test_java_transactions\.py::test_java_consume_transform"),
    (TXN, "franz-go", r"tests/transactions/test_go_transactions\.py::test_franz_go_group_transact"),
    (TXN, "Spark", r"tests/spark/test_transactions_read\.py::test_read_committed_skips"),
    (TXN_ACL, "confluent-kafka", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[confluent-kafka\]"),
    (TXN_ACL, "kafka-python", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[kafka-python\]"),
    (TXN_ACL, "aiokafka", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[aiokafka\]"),
    (TXN_ACL, "Java", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[java-"),
    (TXN_ACL, "franz-go", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[franz-go\]"),
    (TXN_ACL, "Sarama", r"tests/security/test_txn_acls\.py::test_client_transactions_need_write.*\[sarama\]"),
]
FEATURES = list(dict.fromkeys(f for f, _, _ in RULES))
_COMPILED = [(f, c, re.compile(p)) for f, c, p in RULES]


def cells_for(nodeid: str, params: dict[str, object]) -> list[tuple[str, str]]:
    """The (feature, client) cells a test verifies."""
    out = []
    for feature, client, rx in _COMPILED:
        if not rx.search(nodeid):
            continue
        if client is None:
            client = next((_KIND[str(v)] for v in params.values() if str(v) in _KIND), None)
        if client is not None:
            out.append((feature, client))
    return out
