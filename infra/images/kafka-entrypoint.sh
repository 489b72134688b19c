#!/bin/bash
# Writes server.properties from the defaults below and every KAFKA_* variable (KAFKA_FOO_BAR ->
# foo.bar; '__' -> '_', '___' -> '-', as in the apache/kafka image), formats the storage on
# first start (CLUSTER_ID, or a new one), then runs the broker in the foreground.
set -euo pipefail
config=/var/lib/kafka/server.properties
data=${KAFKA_LOG_DIRS:-/var/lib/kafka/data}
java=(java $KAFKA_HEAP_OPTS -Dlog4j2.configurationFile=/opt/kafka/log4j2.yaml -cp '/opt/kafka/libs/*')

declare -A props=(
  [process.roles]=broker,controller
  [node.id]=1
  [listeners]=PLAINTEXT://:9092,CONTROLLER://:9093
  [advertised.listeners]=PLAINTEXT://localhost:9092
  [controller.listener.names]=CONTROLLER
  [listener.security.protocol.map]=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
  [controller.quorum.bootstrap.servers]=localhost:9093
  [log.dirs]=$data
  # memstream creates its topics; a typo must not create one.
  [auto.create.topics.enable]=false
  [offsets.topic.replication.factor]=1
  [transaction.state.log.replication.factor]=1
  [transaction.state.log.min.isr]=1
  [share.coordinator.state.topic.replication.factor]=1
  [share.coordinator.state.topic.min.isr]=1
  [group.initial.rebalance.delay.ms]=0
  [log.cleaner.dedupe.buffer.size]=8388608
)
for name in $(compgen -e | grep '^KAFKA_' || true); do
  case $name in KAFKA_HEAP_OPTS | KAFKA_LOG_DIRS) continue ;; esac
  key=$(printf '%s' "${name#KAFKA_}" | tr '[:upper:]' '[:lower:]' |
    sed -e 's/___/-/g' -e 's/__/@/g' -e 's/_/./g' -e 's/@/_/g')
  props[$key]=${!name}
done
# A static quorum (controller.quorum.voters) and a dynamic one (bootstrap.servers) exclude
# each other; the first is what multi-broker compose files usually name.
standalone=(--standalone)
if [ -n "${props[controller.quorum.voters]:-}" ]; then
  unset 'props[controller.quorum.bootstrap.servers]'
  standalone=()
fi
: >"$config"
for key in "${!props[@]}"; do printf '%s=%s\n' "$key" "${props[$key]}" >>"$config"; done

mkdir -p "$data"
if [ ! -f "$data/meta.properties" ]; then
  cluster_id=${CLUSTER_ID:-$("${java[@]}" kafka.tools.StorageTool random-uuid)}
  "${java[@]}" kafka.tools.StorageTool format "${standalone[@]}" -t "$cluster_id" -c "$config" >/dev/null
fi
exec "${java[@]}" kafka.Kafka "$config"
