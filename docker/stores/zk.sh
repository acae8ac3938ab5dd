# The ZooKeeper variant of failover-test.sh (LOADMGR_DOCKER_STORE=zk), sourced by it: a three-member ensemble
# (docker-compose.zk.yml) read from the host through its published client ports with the loadmgr binary of the
# image (`loadmgr store` and `loadmgr admin`: some 40 ms a call, where zkCli.sh starts a JVM for every poll).
# Defines what failover-test.sh needs of a store; see stores/etcd.sh for the other one.
# shellcheck shell=bash disable=SC2034,SC2154 # sets variables for failover-test.sh and uses its (here, ns, lm)

store_name=ZooKeeper
store_compose_file="$here/docker-compose.zk.yml"
store_project_default=loadmgr-failover-zk
store_image="${LOADMGR_ZK_IMAGE:-loadmgr-zk:local}"
store_services=(zk-1 zk-2 zk-3)
store_ports=("${LOADMGR_DOCKER_ZK_PORT_1:-21811}" "${LOADMGR_DOCKER_ZK_PORT_2:-21812}" "${LOADMGR_DOCKER_ZK_PORT_3:-21813}")
store_url="zk:127.0.0.1:${store_ports[0]},127.0.0.1:${store_ports[1]},127.0.0.1:${store_ports[2]}"

# Everything runs through the loadmgr binary, which failover-test.sh takes out of the image.
store_check_tools() { :; }

zstore() { "$lm" store --store "$store_url" --connect-timeout-ms 3000 --operation-timeout-ms 3000 "$@"; }

# Broker ids registered at /loadbalance/brokers/, one a line.
registered() { zstore ls /loadbalance/brokers; }
# The leader's broker id, from /loadbalance/leader; nothing if there is none.
leader() { zstore get --raw /loadbalance/leader 2>/dev/null | sed -n 's/.*"brokerId":"\([^"]*\)".*/\1/p'; }
# "RANGE OWNER" lines of the namespace's owned bundles, and how many assignment records are moves in flight,
# both from one `loadmgr admin namespaces bundles` (one session instead of one `store get` per bundle), whose
# rows are "RANGE owner OWNER|- [(unloading)] assigned (...)|moving to ... (...)|unassigned".
bundle_rows() { admin namespaces bundles "$ns" | awk '$2 == "owner"'; }
owners() { bundle_rows | awk '$3 != "-" { print $1, $3 }' | sort; }
assigning() { bundle_rows | grep -c ' moving to ' || true; }
