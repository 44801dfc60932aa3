# jocko-py: one Makefile for people and CI.
#   make run    - create .venv, install, start one broker on localhost:9092 (data in ./data);
#                 PORT=, DATA=, ARGS='extra broker flags'
#   make test   - install everything the tests need, then lint, type-check and run the suite
#                 (pytest-xdist, PYTEST_WORKERS=2 processes; PYTEST_WORKERS=0: one process)
#   make test-fast - lint, then the in-process tier only (a few minutes; no brokers, JVMs)
#   Tests come in tiers, marked by what they start (tests/support/tiers.py), for -m:
#     inprocess (nothing outside pytest), processes (brokers, clusters, CLI, kcat, Go),
#     jvm (Java clients, Kafka tools, Apache Kafka), spark (PySpark), netns (fault lab, root)
#     e.g. make pytest PYTEST_ARGS='-m "not jvm and not spark and not netns"'
#   make bench  - benchmark jocko-py against Apache Kafka on this machine
#   make cluster - three brokers on loopback (examples/cluster)
#   make chaos  - fault campaign on real processes (tests/faults; root: netns, tmpfs)

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CACHE  := .cache
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PYTEST_ARGS ?=
# pytest-xdist workers for make test / test-fast (modules stay whole on one worker, the
# fault lab and Spark on one worker each, longest first: tests/support/tiers.py)
PYTEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS))

.PHONY: dist docs compat-matrix api-table chaos txn-soak streams-cluster kgo-suite kgo-share share-suite share-cluster-kafka scale-sim cluster run test test-fast test-durations venv venv-test lint typecheck generate check-generated kcat chromium java-deps go-deps spark-deps pytest bench clean

# setuptools' build-time notices (editable install layout) say nothing to a user
PIP := PYTHONWARNINGS=ignore $(BIN)/pip

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml setup.py jocko_py/protocol/_recwalk.c
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed
venv-test: $(VENV)/.installed-test

# make run [PORT=9092] [DATA=./data] [ARGS='--console-addr localhost:9080 ...']
PORT ?= 9092
DATA ?= ./data
ARGS ?=
run: venv
	@echo "jocko-py is $(BIN)/jocko-py (source $(BIN)/activate puts it on PATH); Ctrl-C stops the broker"
	$(BIN)/jocko-py broker --broker-id 0 --broker-addr localhost:$(PORT) --data-dir $(DATA) $(ARGS)

# three brokers on loopback (9092-9094), consoles on 9392-9394, metrics on 9492-9494,
# data in examples/cluster/data; CLUSTER_ARGS='--no-console --base-port 19092 ...'
CLUSTER_ARGS ?=
cluster: venv
	$(BIN)/python examples/cluster/run.py $(CLUSTER_ARGS)

# Protocol schemas are generated from Kafka's JSON specs and committed.
SPECS ?= specs/kafka-protocol
generate: venv
	$(BIN)/python tools/gen_protocol.py --specs $(SPECS) --out jocko_py/protocol/messages

# The specs are vendored (a clean checkout must build alone); where the shared
# upstream copy is present, the vendored one must not have drifted from it.
SHARED_SPECS ?= ../shared/kafka-protocol-4.4
check-generated: venv
	@if [ -d $(SHARED_SPECS) ]; then \
	  diff -rq $(SHARED_SPECS) $(SPECS) || { echo "$(SPECS) differs from $(SHARED_SPECS): copy it over and run make generate"; exit 1; }; \
	  echo "$(SPECS) matches $(SHARED_SPECS)"; \
	fi
	$(BIN)/python tools/gen_protocol.py --specs $(SPECS) --out jocko_py/protocol/messages --check

kcat:
	@command -v kcat >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q kcat; }

# headless Chromium drives the web console's tests (tests/broker/test_console.py)
chromium:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

java-deps:
	$(MAKE) -C tests/java jars

# Go client tests (tests/clients/go): module downloads; without Go those tests skip.
# Then franz-go's newest release with its pkg/kgo tests compiled, in build/ (tests/kgo_suite.py).
go-deps: venv-test
	@command -v go >/dev/null || { echo "go not found: the Go client tests will skip"; exit 0; }; \
	cd tests/clients/go && go mod download && cd ../../transactions/gotxn && go mod download \
	  && cd ../../security/go && go mod download && cd ../../.. \
	  && $(BIN)/python -m tests.kgo_suite --prepare

# PySpark (the `spark` extra) and the Kafka connector jars for tests/spark and examples/spark.
$(VENV)/.installed-spark: $(VENV)/.installed pyproject.toml
	$(PIP) install -q -e '.[spark]'
	touch $@

spark-deps: $(VENV)/.installed-spark
	$(MAKE) -C spark jars

lint: venv-test
	$(BIN)/ruff check jocko_py tests tools cmd examples bench
	$(BIN)/lint-imports

typecheck: venv-test
	$(BIN)/mypy

pytest: venv-test kcat chromium java-deps go-deps spark-deps
	JOCKO_TEST_STRICT=1 $(BIN)/pytest -q -rsfE --durations=25 $(XDIST) $(PYTEST_ARGS)

test: venv-test kcat chromium java-deps go-deps check-generated lint typecheck pytest

# The in-process tier: codecs, storage, state machines, simulations, in-process brokers.
# JOCKO_TEST_TIER_GUARD=1: a test of this tier that starts a process fails (saying so).
test-fast: venv-test lint
	JOCKO_TEST_TIER_GUARD=1 $(BIN)/pytest -q -rs -m inprocess --durations=10 $(XDIST) $(PYTEST_ARGS)

# Refresh tests/durations.json (seconds per module, the xdist scheduler's longest-first
# order) from a whole run; commit it when modules were added or got much longer.
test-durations: venv-test kcat chromium java-deps go-deps spark-deps
	JOCKO_TEST_STRICT=1 JOCKO_TEST_DURATIONS_OUT=tests/durations.json $(BIN)/pytest -q -rs \
	  $(XDIST) $(PYTEST_ARGS)

# A longer campaign of the cluster simulations (raft, gossip, whole cluster) than the
# one make test runs: SIM_SCHEDULES raft schedules (gossip half, cluster a fifth) from
# a new random base seed, printed; JOCKO_SIM_BASE_SEED=<seed> replays a campaign.
SIM_SCHEDULES ?= 50000
# Kafka's transactions_test on three brokers (tests/transactions/soak.py): 100,000 records
# copied in transactions of 750 under hard and clean broker bounces, copier kills, and
# with one output partition (order kept); each run prints PASS or FAIL with its seed.
txn-soak: venv-test
	$(BIN)/python -m tests.transactions.soak --bounce hard
	$(BIN)/python -m tests.transactions.soak --bounce clean
	$(BIN)/python -m tests.transactions.soak --bounce copier
	$(BIN)/python -m tests.transactions.soak --bounce hard --one-partition

# Kafka Streams 4.4.0 (group.protocol=streams, exactly_once_v2), two instances on three
# brokers, one SIGKILLed mid-stream and restarted: exact counts (tests/groups/streams_cluster.py);
# prints PASS or FAIL with its seed. Then kafka-streams-groups' answers about a running app on
# Apache Kafka 4.4.0 and on jocko-py, compared (tests/groups/streams_describe_vs_kafka44.py).
streams-cluster: venv-test java-deps
	$(BIN)/python -m tests.groups.streams_cluster
	$(BIN)/python -m tests.groups.streams_describe_vs_kafka44

# franz-go's own kgo integration suite (its newest release, through the Go module proxy)
# against three Apache Kafka 4.4.0 nodes and three jocko-py brokers, KGO_TEST_RF=3
# (tests/kgo_suite.py); per-test report in docs/results/<date>-kgo-suite.md; fails when a
# test passing against Kafka does not pass against jocko-py. KGO_RUN narrows -run.
KGO_RUN ?= .
kgo-suite: venv-test
	$(MAKE) -C tests/java kafka-44
	$(BIN)/python -m tests.kgo_suite --run '$(KGO_RUN)'

# Share groups (issue 24) against Apache Kafka 4.4.0 and jocko-py (tests/share: the Java
# KafkaShareConsumer tests, confluent-kafka's ShareConsumer, kafka-share-groups and
# jocko-py share-groups), with the three-broker failover workload and franz-go's share-group
# tests on jocko-py, as make test runs them (~10 min).
share-suite: venv-test go-deps
	$(MAKE) -C tests/java kafka-44 share-44
	JOCKO_SHARE_SUITE=1 JOCKO_TEST_STRICT=1 $(BIN)/pytest -q -rsfE -p no:cacheprovider tests/share

# the same workload on three Apache Kafka 4.4.0 nodes (checks the workload itself)
share-cluster-kafka: venv-test
	$(MAKE) -C tests/java kafka-44 share-44
	$(BIN)/python -m tests.share.share_cluster --broker kafka44

# franz-go's own share-group tests (issue 24) the same way: report in
# docs/results/<date>-kgo-share.md; fails when one passes against Kafka 4.4.0 but not jocko-py.
# KGO_TEST_RECORDS=50000: TestShareGroupETL's 500,000 records time out against Kafka 4.4.0
# itself on 2 loaded cores.
KGO_SHARE_RUN := ^(TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|TestConsumeRegexShareSkipsInternal)$$
kgo-share: venv-test
	$(MAKE) -C tests/java kafka-44
	$(BIN)/python -m tests.kgo_suite --run '$(KGO_SHARE_RUN)' --records 50000 \
	  --out docs/results/$$(date -u +%F)-kgo-share.md

sim-long: venv-test
	JOCKO_SIM_SCHEDULES=$(SIM_SCHEDULES) $(BIN)/pytest -q -rs -p no:cacheprovider tests/cluster/test_simulation.py
	JOCKO_SIM_GROUP_SCHEDULES=$$(( $(SIM_SCHEDULES) / 50 )) $(BIN)/pytest -q -rs -p no:cacheprovider tests/groups/test_group_sim.py
	JOCKO_SIM_TXN_SCHEDULES=$$(( $(SIM_SCHEDULES) / 50 )) $(BIN)/pytest -q -rs -p no:cacheprovider tests/txn/test_txn_sim.py
	JOCKO_SIM_BROKER_SCHEDULES=$$(( $(SIM_SCHEDULES) / 100 )) $(BIN)/pytest -q -rs -p no:cacheprovider tests/cluster/test_broker_sim.py -k schedules

# A fault campaign (tests/faults/campaign.py): fresh three-broker labs back to back for
# CHAOS_DURATION seconds, nemeses from CHAOS_NEMESES (all, matrix, kill, pause, partition,
# power-loss, disk-full or single names), a new base seed each time unless CHAOS_SEED is
# set; report in chaos/<UTC stamp>/report.md and .json. Needs root (netns, tmpfs).
CHAOS_DURATION ?= 1800
CHAOS_NEMESES ?= all
CHAOS_SEED ?=
CHAOS_BROKERS ?= 3
CHAOS_RUN_SECONDS ?= 240
chaos: venv-test
	$(BIN)/python -m tests.faults.campaign --duration $(CHAOS_DURATION) \
	  --nemeses $(CHAOS_NEMESES) --brokers $(CHAOS_BROKERS) \
	  --run-seconds $(CHAOS_RUN_SECONDS) $(if $(CHAOS_SEED),--seed $(CHAOS_SEED))

# Scale by simulation: the real controller, metadata image and gossip core with 100
# brokers, 100,000 partitions and 100-500 gossip members, and controller failovers
# (crash, minority partition) on the real raft core (tests/cluster/sim_scale.py).
scale-sim: venv-test
	$(BIN)/python -m tests.cluster.sim_scale

# The README's generated compatibility matrix, from the outcomes the last test runs
# recorded in build/compat-results.json (tests/compat.py: which tests verify which cell).
compat-matrix: venv
	$(BIN)/python tools/compat_matrix.py --write README.md

# the README's Kafka 4.4 API table, from the last tests/parity/test_kafka44_api_versions.py run
api-table: venv
	$(BIN)/python tools/api_table.py --write README.md

# an sdist and a wheel (built from the sdist) in dist/
dist: venv-test
	rm -rf dist && PYTHONWARNINGS=ignore $(BIN)/python -m build --outdir dist .

# the reference pages in docs/ as a static site in build/site (broken links fail)
docs: venv-test
	$(BIN)/mkdocs build --strict

bench: venv
	$(MAKE) -C bench all

clean:
	rm -rf $(VENV) $(CACHE) data build *.egg-info
