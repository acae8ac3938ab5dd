# The etcd variant of failover-test.sh (LOADMGR_DOCKER_STORE=etcd, the default), sourced by it: three etcd
# members (docker-compose.yml) read from the host with etcdctl through their published client ports.
# Defines what failover-test.sh needs of a store; see stores/zk.sh for the other one.
# shellcheck shell=bash disable=SC2034,SC2154 # sets variables for failover-test.sh and uses its (here, ns, lm)

store_name=etcd
store_compose_file="$here/docker-compose.yml"
store_project_default=loadmgr-failover
store_image="${LOADMGR_ETCD_IMAGE:-loadmgr-etcd:local}"
store_services=(etcd-1 etcd-2 etcd-3)
store_ports=("${LOADMGR_DOCKER_ETCD_PORT_1:-23791}" "${LOADMGR_DOCKER_ETCD_PORT_2:-23792}" "${LOADMGR_DOCKER_ETCD_PORT_3:-23793}")
store_endpoints="127.0.0.1:${store_ports[0]},127.0.0.1:${store_ports[1]},127.0.0.1:${store_ports[2]}"
# The store URL for `loadmgr admin` on the host.
store_url="etcd:http://${store_endpoints//,/,http://}"

store_check_tools() {
  command -v etcdctl >/dev/null 2>&1 || fail "etcdctl is missing: install etcd-client (scripts/install-test-deps.sh does)"
}

ectl() { etcdctl --endpoints "$store_endpoints" --dial-timeout=2s --command-timeout=3s "$@"; }

# Broker ids registered at /loadbalance/brokers/, one a line.
registered() { ectl get --keys-only --prefix /loadbalance/brokers/ | sed -n 's|^/loadbalance/brokers/||p'; }
# The leader's broker id, from /loadbalance/leader; nothing if there is none.
leader() { ectl get --print-value-only /loadbalance/leader | sed -n 's/.*"brokerId":"\([^"]*\)".*/\1/p'; }
# "RANGE OWNER" lines of the namespace's ownership nodes (/namespace/<ns>/<range>, the owner from httpUrl).
owners() {
  ectl get --prefix "/namespace/$ns/" | awk '
    NR % 2 == 1 { n = split($0, parts, "/"); range = parts[n]; next }
    { owner = "?"
      if (match($0, /"httpUrl":"[a-z]+:\/\/[^"]*"/)) { owner = substr($0, RSTART + 11, RLENGTH - 12); sub(/^[a-z]+:\/\//, "", owner) }
      print range, owner }' | sort
}
# How many of the namespace's assignment records are moves in flight.
assigning() { ectl get --print-value-only --prefix "/loadmgr/assignments/$ns/" | grep -c '"state":"assigning"' || true; }
