#!/usr/bin/env bash
# Start a single-node Apache Kafka 3.9 (KRaft, combined broker+controller) in the
# foreground, for validating the end-to-end tests against a reference broker:
#   make -C tests/java kafka-ref && tests/java/kafka-ref/run-kafka.sh [PORT] [DATA_DIR] [CTRL_PORT]
#   JOCKO_TEST_BOOTSTRAP=127.0.0.1:PORT .venv/bin/pytest tests/clients tests/badinput
# Not used by CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
port="${1:-19092}"
data="${2:-$repo/.cache/kafka-ref/data-$port}"
ctrl="${3:-$((port + 1))}"
libs="$repo/.cache/kafka-ref/libs"
[ -d "$libs" ] || { echo "no $libs: run make -C tests/java kafka-ref" >&2; exit 2; }
mkdir -p "$data"
cfg="$data/server.properties"
cat > "$cfg" <<CFG
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$ctrl
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctrl
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
CFG
cat > "$data/log4j.properties" <<'L4J'
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.server.BrokerServer=INFO
L4J
java_opts=(-Xms256m -Xmx768m -XX:+UseSerialGC -Dlog4j.configuration="file:$data/log4j.properties")
if [ ! -f "$data/logs/meta.properties" ]; then
  java "${java_opts[@]}" -cp "$libs/*" kafka.tools.StorageTool format \
    -t "$(java -cp "$libs/*" kafka.tools.StorageTool random-uuid)" -c "$cfg" >/dev/null
fi
exec java "${java_opts[@]}" -cp "$libs/*" kafka.Kafka "$cfg"
