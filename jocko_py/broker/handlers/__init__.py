"""One module per Kafka API. Importing a module registers its handler."""

from __future__ import annotations

import importlib

MODULES = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "topics_admin",
    "configs",
    "delete_records",
    "describe_cluster",
    "init_producer_id",
    "find_coordinator",
    "groups",
    "consumer_groups",
    "streams_groups",
    "share_groups",
    "offsets",
    "controller_apis",
    "offset_for_leader_epoch",
    "describe_quorum",
    "leadership",
    "describe_log_dirs",
    "describe_topic_partitions",
    "features",
    "describe_producers",
    "sasl",
    "scram_credentials",
    "acls",
    "client_quotas",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "write_txn_markers",
    "txn_offset_commit",
    "describe_transactions",
    "list_transactions",
    "list_config_resources",
]


def load_all() -> None:
    for m in MODULES:
        importlib.import_module(f"jocko_py.broker.handlers.{m}")
