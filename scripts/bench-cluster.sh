#!/usr/bin/env bash
# `make bench-cluster`: starts a ZooKeeper and an etcd of their own (loopback ports, temporary directories,
# stopped at the end) and runs `loadmgr bench cluster` against each with the arguments given
# (default: --brokers 1000 --bundles 100000), release build. Needs `make deps` (zookeeper, etcd-server).
set -eu
cd "$(dirname "$0")/.."
args=${BENCH_CLUSTER_ARGS:-"--brokers 1000 --bundles 100000"}
stores=${BENCH_CLUSTER_STORES:-"zk etcd"}
cargo build --release --quiet
bin=target/release/loadmgr
dir=$(mktemp -d /tmp/loadmgr-bench-cluster.XXXXXX)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; rm -rf "$dir"; }
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 1 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; echo "nothing listens on $1" >&2; exit 1; }
for store in $stores; do
  case $store in
  zk)
    port=$(free_port)
    mkdir -p "$dir/zk/data"
    cat > "$dir/zk/zoo.cfg" <<CFG
tickTime=1000
dataDir=$dir/zk/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
maxSessionTimeout=60000
admin.enableServer=false
CFG
    # The Debian jar names its dependencies in its manifest; only a logger is added (as the tests do).
    cp="/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
    java -Xmx2g -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zk/zoo.cfg" > "$dir/zk/log" 2>&1 &
    pids="$pids $!"
    wait_port "$port"
    url="zk:127.0.0.1:$port"
    ;;
  etcd)
    port=$(free_port); peer=$(free_port)
    # zap, not etcd 3.4's default logger: with the default, a read index that times out under load logs
    # through a nil zap logger and the server panics (seen at 100 x 65,000 on etcd 3.4.23).
    # A backend commit every 10 ms, not 100 ms: etcd 3.4 copies every write since the last commit for each
    # read and each write's compare, so at a thousand brokers the copies were most of its allocations
    # (docs/benchmarks.md, 2026-12-04 "etcd copies"). BENCH_ETCD_BATCH_INTERVAL=100ms gives etcd's default.
    etcd --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$port" \
      --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$peer" \
      --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "default=http://127.0.0.1:$peer" \
      --backend-batch-interval "${BENCH_ETCD_BATCH_INTERVAL:-10ms}" \
      --quota-backend-bytes 4294967296 --logger zap --log-outputs stderr > "$dir/etcd.log" 2>&1 &
    pids="$pids $!"
    wait_port "$port"
    url="etcd:127.0.0.1:$port"
    ;;
  *) echo "unknown store $store (zk, etcd)" >&2; exit 2 ;;
  esac
  # shellcheck disable=SC2086
  "$bin" bench cluster --store "$url" $args
done
