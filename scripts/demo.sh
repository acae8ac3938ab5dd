#!/usr/bin/env bash
# `make demo`: loadmgr's main job on a laptop. Until the simulator lands it walks through the bundle, JSON and
# configuration tools on built-in inputs; it needs nothing but cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --bin loadmgr
bin=target/debug/loadmgr
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

step "$bin" bundles boundaries 4
step "$bin" bundles lookup --count 4 persistent://public/default/my-topic my-topic-partition-0 my-topic-partition-1
step "$bin" bundles split 0x00000000_0xffffffff --algorithm range_equally_divide
step "$bin" bundles split 0x40000000_0x80000000 --algorithm topic_count_equally_divide \
  --topic my-topic-partition-1 --topic my-topic-partition-5 --topic my-topic-partition-9 --topic orders-3

printf '%s' '{"webServiceUrl":"http://broker-1:8080","cpu":{"usage":7.31,"limit":800},"directMemory":{"usage":36,"limit":256},"bandwidthIn":{"usage":0.83,"limit":10000000}}' > "$tmp/report.json"
step "$bin" json check "$tmp/report.json"

cat > "$tmp/broker.conf" <<'CONF'
# A 4.x-style broker.conf that only picks the shedder.
loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder
loadBalancerBandwithInResourceWeight=2.0
managedLedgerDefaultEnsembleSize=2
CONF
printf '\n\033[1m$ %s\033[0m\n' "$bin config check $tmp/broker.conf | grep -E 'Strategy|ResourceWeight|maxUnload'"
"$bin" config check "$tmp/broker.conf" | grep -E 'Strategy|ResourceWeight|maxUnload'
