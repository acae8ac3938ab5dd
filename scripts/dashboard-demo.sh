#!/usr/bin/env bash
# `make dashboard-demo`: a small live cluster to look at in the dashboard. Starts a ZooKeeper of its own
# (loopback port, temporary directory), one `loadmgr broker` with synthetic traffic that takes every bundle of
# two namespaces, then three more brokers (one with twice the cores) so that the leader sheds load to them and
# splits the hot namespace's bundles, then an operator unload. Prints the dashboard's URL and runs until
# Ctrl-C; with DEMO_SCREENSHOT=FILE it waits DEMO_SECONDS (default 300) and writes a headless Chromium
# screenshot of the page instead (how docs/dashboard.png is made). Needs `make deps` (zookeeper, chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet
bin=$PWD/target/debug/loadmgr
dir=$(mktemp -d /tmp/loadmgr-dashboard-demo.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Sleeps so that Ctrl-C (or a TERM) runs the cleanup at once rather than after the sleep.
pause() { sleep "$1" & wait $!; }
wait_port() {
  for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done
  echo "nothing listens on $1" >&2
  exit 1
}

zk_port=$(free_port)
mkdir -p "$dir/zk"
cat > "$dir/zoo.cfg" <<CFG
tickTime=1000
dataDir=$dir/zk
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
CFG
# The Debian jar names its dependencies in its manifest; only a logger is added (as the tests do).
cp="/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
java -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zoo.cfg" > "$dir/zk.log" 2>&1 &
pids+=($!)
wait_port "$zk_port"

cat > "$dir/broker.conf" <<CONF
metadataStoreUrl=zk:127.0.0.1:$zk_port
bindAddress=127.0.0.1
clusterName=demo
metadataStoreSessionTimeoutMillis=6000
loadBalancerReportUpdateMinIntervalMillis=1000
loadmgrSheddingIntervalMillis=10000
loadmgrResourceQuotaUpdateIntervalMillis=10000
loadBalancerSheddingGracePeriodMinutes=1
loadBalancerNamespaceBundleMaxTopics=12
defaultNumberOfNamespaceBundles=8
CONF
profile() {
  cat <<JSON
{"cores": $1, "cpuBasePercent": 5, "cpuPercentPer1000Msgs": 12, "unloadDelayMs": 300,
 "topics": [
  {"name": "persistent://public/orders/o-{0..63}", "msgRateIn": 40, "msgRateOut": 60, "msgSizeBytes": 1024, "producers": 1, "consumers": 2},
  {"name": "persistent://public/clicks/c-{0..47}", "msgRateIn": 90, "msgRateOut": 90, "msgSizeBytes": 512, "producers": 1, "consumers": 1}
 ]}
JSON
}
profile 1 > "$dir/small.json"
profile 2 > "$dir/big.json"

ports=()
start_broker() { # index, profile
  local port
  port=$(free_port)
  ports+=("$port")
  "$bin" broker --config "$dir/broker.conf" --advertised-address 127.0.0.1 --web-port "$port" \
    --synthetic "$dir/$2.json" > "$dir/broker-$1.log" 2>&1 &
  pids+=($!)
  wait_port "$port"
}

echo "ZooKeeper on 127.0.0.1:$zk_port; logs in $dir" >&2
start_broker 1 small
url="http://127.0.0.1:${ports[0]}"
pause 3
"$bin" admin --url "$url" namespaces create public/orders --bundles 8 > /dev/null
"$bin" admin --url "$url" namespaces create public/clicks --bundles 2 > /dev/null
echo "dashboard: $url/dashboard (any broker serves it)" >&2
pause 30
start_broker 2 small
start_broker 3 big
echo "brokers 2 and 3 joined" >&2
pause 60
start_broker 4 small
echo "broker 4 joined" >&2
pause 30
"$bin" admin --url "$url" namespaces unload public/orders > /dev/null
echo "unloaded public/orders" >&2

if [ -n "${DEMO_SCREENSHOT:-}" ]; then
  pause "${DEMO_SECONDS:-300}"
  out=$(realpath -m "$DEMO_SCREENSHOT")
  chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --window-size=1400,1150 --virtual-time-budget=10000 --screenshot="$out" \
    "http://127.0.0.1:${ports[1]}/dashboard" 2> "$dir/chromium.log" || { cat "$dir/chromium.log" >&2; exit 1; }
  echo "wrote $out" >&2
else
  echo "running; Ctrl-C stops the brokers and ZooKeeper" >&2
  wait
fi
