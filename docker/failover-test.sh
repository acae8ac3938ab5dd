#!/usr/bin/env bash
# Failover test of three loadmgr brokers in Docker, on a three-member etcd cluster (docker-compose.yml) or,
# with LOADMGR_DOCKER_STORE=zk, a three-member ZooKeeper ensemble (docker-compose.zk.yml):
#
#   (a) SIGKILL the leader's container: a new leader within the session timeout + 2 s, and the dead broker's
#       bundles owned by the others;
#   (b) start it again: it registers again;
#   (c) cut a non-leader broker that owns bundles off the network: its bundles are owned by the others once its
#       session expires, and it FENCED itself: for every bundle it served, its log says it stopped serving it
#       before another broker's log says it acquired it (RFC 3339 timestamps; all containers share the clock);
#   (d) reconnect it: it registers again and takes no bundle back;
#   (e) the brokers' serving logs (--serving-log: when each one served which bundle, in µs of the shared clock)
#       show no bundle served by two brokers at the same instant over the whole run, and the reconnected broker
#       serving nothing after (d).
#
# The steps and checks are the same on both stores; what differs (the Compose file, the store's containers, how
# the registered brokers, the leader and the bundles' owners are read) is in stores/etcd.sh and stores/zk.sh.
#
# The cluster is always taken down (`docker-compose down -v`) at the end; the containers' logs are kept in
# LOADMGR_DOCKER_LOG_DIR (default: target/docker-failover-logs/STORE) and printed on failure. All traffic stays
# on the private Docker network and 127.0.0.1 (the store's published client ports).
#
# Environment:
#   LOADMGR_DOCKER_STORE        etcd (default) or zk
#   LOADMGR_BIN                 loadmgr binary for the image (default: cargo build --release; see build-images.sh)
#   LOADMGR_DOCKER_SKIP_BUILD=1 use the existing images as they are
#   LOADMGR_DOCKER_FENCING=warn report a fencing violation (in the logs (c) or the serving logs (e)) as a warning
#                               instead of failing
#   LOADMGR_DOCKER_LOG_DIR      where to keep the containers' logs
#   LOADMGR_DOCKER_PROJECT      Compose project name (default loadmgr-failover, loadmgr-failover-zk)
#   LOADMGR_DOCKER_ETCD_PORT_1..3  etcd client ports published on 127.0.0.1 (default 23791..23793)
#   LOADMGR_DOCKER_ZK_PORT_1..3    ZooKeeper client ports published on 127.0.0.1 (default 21811..21813)
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
store_kind="${LOADMGR_DOCKER_STORE:-etcd}"
fencing_mode="${LOADMGR_DOCKER_FENCING:-strict}"
log_dir="${LOADMGR_DOCKER_LOG_DIR:-$here/../target/docker-failover-logs/$store_kind}"
ns=public/demo
bundles=12
brokers=(broker-1 broker-2 broker-3)
session_ms="$(sed -n 's/^metadataStoreSessionTimeoutMillis=\([0-9]*\)$/\1/p' "$here/conf/broker.conf")"

# Time limits, ms after the event. A new leader must be elected within the session timeout + 2 s; the others
# leave room for the leader's reaction and, on reconnection, for the store client's back-off.
limit_leader_ms=$((session_ms + 2000))
limit_reowned_ms=$((session_ms + 5000))
limit_register_ms=30000
settle_ms=6000 # how long a reconnected broker is watched for taking bundles back

results=()
note() {
  echo "== $*"
  results+=("$*")
}
fail() {
  echo "FAILED: $*" >&2
  results+=("FAILED: $*")
  exit 1
}
warn() {
  echo "WARNING: $*" >&2
  results+=("WARNING: $*")
}

# ---------------------------------------------------------------------------------------------------------------
# The store: registered(), leader(), owners(), assigning(), the Compose file and the store's services.

if [ "$store_kind" = etcd ]; then
  # shellcheck source=stores/etcd.sh
  source "$here/stores/etcd.sh"
elif [ "$store_kind" = zk ]; then
  # shellcheck source=stores/zk.sh
  source "$here/stores/zk.sh"
else
  fail "LOADMGR_DOCKER_STORE must be etcd or zk, not $store_kind"
fi
project="${LOADMGR_DOCKER_PROJECT:-$store_project_default}"

# ---------------------------------------------------------------------------------------------------------------
# Tools

command -v docker >/dev/null 2>&1 || fail "docker is not installed"
docker info >/dev/null 2>&1 || fail "the Docker engine does not answer (\`docker info\` fails)"
if command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose -p "$project" -f "$store_compose_file")
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose -p "$project" -f "$store_compose_file")
else
  fail "neither docker-compose nor the docker compose plugin is installed (Debian: apt-get install docker-compose)"
fi
store_check_tools
[ -n "$session_ms" ] || fail "no metadataStoreSessionTimeoutMillis in $here/conf/broker.conf"
case "$fencing_mode" in strict | warn) ;; *) fail "LOADMGR_DOCKER_FENCING must be strict or warn, not $fencing_mode" ;; esac

if [ "${LOADMGR_DOCKER_SKIP_BUILD:-0}" = 1 ]; then
  for image in "${LOADMGR_IMAGE:-loadmgr:local}" "$store_image"; do
    docker image inspect "$image" >/dev/null 2>&1 || fail "LOADMGR_DOCKER_SKIP_BUILD=1 but there is no image $image"
  done
else
  "$here/build-images.sh" "$store_kind" || fail "building the images failed"
fi

mkdir -p "$log_dir"
log_dir="$(cd "$log_dir" && pwd)"
serving_dir="$log_dir/serving"
rm -rf "$serving_dir"
mkdir -p "$serving_dir"
work="$(mktemp -d "${TMPDIR:-/tmp}/loadmgr-failover.XXXXXX")"
# `loadmgr admin` runs on the host against the store's published ports, with the binary taken out of the image,
# so it is the very binary the brokers run.
lm="$work/loadmgr"
tmp_container="$(docker create "${LOADMGR_IMAGE:-loadmgr:local}")"
docker cp "$tmp_container:/usr/local/bin/loadmgr" "$lm" >/dev/null
docker rm "$tmp_container" >/dev/null
"$lm" --version >/dev/null || fail "the loadmgr binary of the image does not run on this host"

admin() { "$lm" admin --store "$store_url" --config "$here/conf/broker.conf" --timeout-ms 10000 "$@"; }
now_ms() { date +%s%3N; }
# The format of tracing's timestamps, so that they compare as text.
now_rfc3339() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }
to_us() { date -u -d "$1" +%s%6N; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f s", ms / 1000 }'; }

cid() { "${compose[@]}" ps -q "$1"; }
service_of() { echo "${1%%:*}"; } # broker-2:8082 -> broker-2

owned_by() { owners | awk -v b="$1" '$2 == b { print $1 }'; }

# Polls "$@" every 0.1 s until it succeeds or limit_ms pass since start_ms; sets `elapsed` (ms since start_ms).
elapsed=0
wait_for() {
  local start_ms="$1" limit_ms="$2" what="$3"
  shift 3
  while true; do
    if "$@" >/dev/null 2>&1; then
      elapsed=$(($(now_ms) - start_ms))
      return 0
    fi
    if [ $(($(now_ms) - start_ms)) -gt "$limit_ms" ]; then
      fail "$what: not within $(secs "$limit_ms")"
    fi
    sleep 0.1
  done
}

# (No grep -q or head on a pipe: a reader that stops early fails the pipe under pipefail, the writer gets SIGPIPE.)
# watch_until START_MS LIMIT_MS VAR COMMAND... [-- VAR COMMAND...]...: polls every command every 0.1 s until all have
# succeeded once or LIMIT_MS pass since START_MS; sets each VAR to the time (ms) its command first succeeded, and
# leaves it empty if it never did. A time is thus late by up to one round of polls (the 0.1 s pause and the
# reads): poll_round_ms is set to their mean length.
poll_round_ms=0
watch_until() {
  local start_ms="$1" limit_ms="$2" i var pending began rounds=0
  shift 2
  local -a vars=() cmds=()
  while [ $# -gt 0 ]; do
    var="$1"
    shift
    local -a cmd=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
      cmd+=("$1")
      shift
    done
    [ $# -eq 0 ] || shift
    vars+=("$var")
    cmds+=("$(printf '%q ' "${cmd[@]}")")
  done
  began="$(now_ms)"
  while true; do
    rounds=$((rounds + 1))
    pending=0
    for i in "${!vars[@]}"; do
      [ -z "${!vars[i]}" ] || continue
      if eval "${cmds[i]}" >/dev/null 2>&1; then
        printf -v "${vars[i]}" '%s' "$(now_ms)"
      else
        pending=1
      fi
    done
    if [ "$pending" -eq 0 ] || [ $(($(now_ms) - start_ms)) -gt "$limit_ms" ]; then
      poll_round_ms=$((($(now_ms) - began) / rounds))
      return 0
    fi
    sleep 0.1
  done
}

is_registered() { grep -qx "$1" <<<"$(registered)"; }
not_registered() { ! is_registered "$1"; }
three_registered() { [ "$(registered | wc -l)" -eq 3 ]; }
# Docker's view of the brokers' healthchecks (`loadmgr health` in each container).
three_healthy() {
  local n
  for n in 1 2 3; do
    [ "$(docker inspect -f '{{.State.Health.Status}}' "$(cid "broker-$n")")" = healthy ] || return 1
  done
}
has_leader() { [ -n "$(leader)" ]; }
leader_is_not() {
  local l
  l="$(leader)"
  [ -n "$l" ] && [ "$l" != "$1" ]
}
# Every bundle of the namespace owned by a registered broker, and no move in flight.
all_owned() {
  local regs
  regs="$(registered)"
  [ "$(owners | awk '$2 != "?"' | wc -l)" -eq "$bundles" ] || return 1
  [ "$(assigning)" -eq 0 ] || return 1
  owners | awk '{ print $2 }' | sort -u | while read -r o; do grep -qx "$o" <<<"$regs" || return 1; done
}
# The given ranges all owned, by registered brokers other than $1.
reowned_without() {
  local gone="$1" regs map range owner
  shift
  regs="$(registered)"
  map="$(owners)"
  for range in "$@"; do
    owner="$(awk -v r="$range" '$1 == r { print $2 }' <<<"$map")"
    [ -n "$owner" ] && [ "$owner" != "$gone" ] && grep -qx "$owner" <<<"$regs" || return 1
  done
}

# The serving logs, in $serving_dir: SERVICE's /serving/SERVICE.jsonl (on the volume the brokers share) copied as
# NAME.jsonl, with the time (µs) at which an interval still open in it ended at the latest in NAME.end: the
# process's death, or the time of the copy for a running one. A restarted broker truncates its file, so (b)
# copies the killed one's first.
now_us() { date +%s%6N; }
fetch_serving_log() { # $1: service, $2: name, $3: end (µs)
  docker cp "$(cid "$1"):/serving/$1.jsonl" "$serving_dir/$2.jsonl" >/dev/null && echo "$1 $3" >"$serving_dir/$2.end"
}

# A container's log without colours.
container_log() { docker logs "$(cid "$1")" 2>&1 | sed 's/\x1b\[[0-9;]*m//g'; }

save_logs() {
  local s
  for s in "${store_services[@]}" "${brokers[@]}"; do
    if [ -n "$(cid "$s" 2>/dev/null)" ]; then
      container_log "$s" >"$log_dir/$s.log" 2>/dev/null
    fi
  done
  for s in "${brokers[@]}"; do
    fetch_serving_log "$s" "$s" "$(now_us)" 2>/dev/null || true
  done
}

finish() {
  local status=$?
  trap - EXIT
  set +e
  if [ -n "$(cid broker-1 2>/dev/null)" ]; then
    save_logs
    if [ "$status" -ne 0 ]; then
      for s in "${brokers[@]}" "${store_services[0]}"; do
        echo "----- last 60 lines of $s's log (all of it: $log_dir/$s.log) -----" >&2
        tail -n 60 "$log_dir/$s.log" >&2
      done
    fi
  fi
  echo "-- docker-compose down -v" >&2
  "${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || echo "docker-compose down failed" >&2
  rm -rf "$work"
  echo
  echo "=== failover test results on $store_name (containers' logs in $log_dir) ==="
  printf '%s\n' "${results[@]}"
  local warnings
  warnings="$(printf '%s\n' "${results[@]}" | grep -c '^WARNING' || true)"
  if [ "$status" -ne 0 ]; then
    echo "FAILED (exit $status)"
  elif [ "$warnings" -gt 0 ]; then
    echo "PASSED with $warnings warning(s)"
  else
    echo "PASSED"
  fi
  exit "$status"
}
trap finish EXIT

# ---------------------------------------------------------------------------------------------------------------
# Start-up

"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true # what an interrupted run may have left
t0="$(now_ms)"
echo "-- docker-compose up -d ($store_name first, the brokers once every $store_name member is healthy)"
"${compose[@]}" up -d || fail "docker-compose up failed"
wait_for "$t0" 60000 "3 brokers registered" three_registered
wait_for "$t0" 60000 "a leader elected" has_leader
wait_for "$t0" 60000 "3 brokers healthy (their Docker healthchecks, loadmgr health)" three_healthy
note "start: 3 brokers registered and $(leader) leading $(secs $(($(now_ms) - t0))) after \`up\` (session timeout $(secs "$session_ms"))"

admin namespaces create "$ns" --bundles "$bundles" >/dev/null || fail "namespaces create $ns failed"
# One topic of the brokers' traffic profile per bundle, looked up as a client would: the leader assigns them.
topics=()
for i in $(seq 0 95); do topics+=("persistent://$ns/t-$i"); done
mapfile -t probes < <("$lm" bundles lookup --count "$bundles" "${topics[@]}" | awk -F'\t' '!seen[$2]++ { print $1 }')
[ "${#probes[@]}" -eq "$bundles" ] || fail "the profile's topics fall in ${#probes[@]} of the $bundles bundles"
t0="$(now_ms)"
for topic in "${probes[@]}"; do
  out="$(admin topics lookup "$topic" 2>&1)" || fail "topics lookup $topic failed: $out"
done
wait_for "$t0" 30000 "all $bundles bundles owned" all_owned
note "ownership: $bundles bundles owned after $(secs "$elapsed"): $(owners | awk '{ print $2 }' | sort | uniq -c | awk '{ printf "%s%s %d", sep, $2, $1; sep = ", " }')"

# Moves one bundle to $1 (an admin unload), for a step that needs a broker with bundles.
give_bundle() {
  local to="$1" range
  range="$(owners | awk -v b="$to" '$2 != b && !done { print $1; done = 1 }')"
  echo "-- moving $ns/$range to $to first"
  admin namespaces unload "$ns" --bundle "$range" --destination-broker "$to" >/dev/null || fail "unloading $range to $to failed"
  wait_for "$(now_ms)" 20000 "all bundles owned after the move" all_owned
}

# ---------------------------------------------------------------------------------------------------------------
# (a) SIGKILL the leader

old_leader="$(leader)"
[ -n "$(owned_by "$old_leader")" ] || give_bundle "$old_leader"
mapfile -t lost < <(owned_by "$old_leader")
old_leader_cid="$(cid "$(service_of "$old_leader")")"
echo "-- (a) docker kill (SIGKILL) $old_leader, the leader, owning ${#lost[@]} bundles"
t0="$(now_ms)"
killed_us="$(now_us)"
docker kill "$old_leader_cid" >/dev/null
docker wait "$old_leader_cid" >/dev/null
# The time the broker died, as Docker recorded it: `docker kill` itself takes a few hundred ms here.
died_at="$(docker inspect -f '{{.State.FinishedAt}}' "$old_leader_cid")"
died_ms="$(date -d "$died_at" +%s%3N)"
at_leader="" at_dereg="" at_reowned=""
watch_until "$t0" $((limit_reowned_ms + 1000)) \
  at_leader leader_is_not "$old_leader" -- \
  at_dereg not_registered "$old_leader" -- \
  at_reowned reowned_without "$old_leader" "${lost[@]}"
[ -n "$at_leader" ] || fail "(a) no new leader $(secs $(($(now_ms) - died_ms))) after $old_leader died"
new_leader="$(leader)"
t_leader=$((at_leader - died_ms))
[ "$t_leader" -le "$limit_leader_ms" ] \
  || fail "(a) new leader $new_leader not until $(secs "$t_leader") after $old_leader died (limit $(secs "$limit_leader_ms"))"
[ -n "$at_dereg" ] || fail "(a) $old_leader's registration still there $(secs $(($(now_ms) - died_ms))) after it died"
[ -n "$at_reowned" ] || fail "(a) $old_leader's bundles not all owned by the others $(secs $(($(now_ms) - died_ms))) after it died: $(owners | tr '\n' ' ')"
t_reowned=$((at_reowned - died_ms))
[ "$t_reowned" -le "$limit_reowned_ms" ] || fail "(a) $old_leader's bundles owned by others not until $(secs "$t_reowned") after it died (limit $(secs "$limit_reowned_ms"))"
note "(a) leader $old_leader SIGKILLed: its container exited $(secs $((died_ms - t0))) after \`docker kill\` began"
note "(a) after its death: registration gone $(secs $((at_dereg - died_ms))), new leader $new_leader $(secs "$t_leader") (limit $(secs "$limit_leader_ms"); $(secs $((at_leader - t0))) after \`docker kill\` began), its ${#lost[@]} bundles owned by others $(secs "$t_reowned") (limit $(secs "$limit_reowned_ms")); polled every $(secs "$poll_round_ms")"

# ---------------------------------------------------------------------------------------------------------------
# (b) bring it back

fetch_serving_log "$(service_of "$old_leader")" "$(service_of "$old_leader").before-restart" "$(date -d "$died_at" +%s%6N)" \
  || fail "(b) cannot copy the serving log of $old_leader before restarting it"
echo "-- (b) docker start $(service_of "$old_leader")"
t0="$(now_ms)"
docker start "$(cid "$(service_of "$old_leader")")" >/dev/null
wait_for "$t0" "$limit_register_ms" "$old_leader registered again after its restart" is_registered "$old_leader"
note "(b) $old_leader restarted: registered again after $(secs "$elapsed"); owns $(owned_by "$old_leader" | wc -l) bundles (shedding is off)"

# ---------------------------------------------------------------------------------------------------------------
# (c) partition a non-leader broker that owns bundles

wait_for "$(now_ms)" 20000 "a settled cluster before the partition" all_owned
current_leader="$(leader)"
pick_victim() {
  owners | awk -v l="$current_leader" '$2 != l { n[$2]++ } END { for (b in n) print n[b], b }' | sort -rn | awk 'NR == 1 { print $2 }'
}
victim="$(pick_victim)"
if [ -z "$victim" ]; then
  victim="$(registered | awk -v l="$current_leader" '$0 != l' | awk 'NR == 1')"
  [ -n "$victim" ] || fail "(c) no broker but the leader $current_leader is registered"
  give_bundle "$victim"
fi
victim_service="$(service_of "$victim")"
victim_cid="$(cid "$victim_service")"
network="$(docker inspect -f '{{range $name, $_ := .NetworkSettings.Networks}}{{$name}} {{end}}' "$victim_cid" | awk '{ print $1 }')"
mapfile -t cut < <(owned_by "$victim")
before_partition="$(owners)"
echo "-- (c) docker network disconnect $network $victim_service ($victim, owning ${#cut[@]} bundles; leader $current_leader)"
t0="$(now_ms)"
t0_text="$(now_rfc3339)"
partitioned_us="$(to_us "$t0_text")"
docker network disconnect "$network" "$victim_cid"
t_cmd=$(($(now_ms) - t0))
at_dereg="" at_reowned=""
watch_until "$t0" "$limit_reowned_ms" \
  at_dereg not_registered "$victim" -- \
  at_reowned reowned_without "$victim" "${cut[@]}"
[ -n "$at_dereg" ] || fail "(c) $victim's registration still there $(secs "$limit_reowned_ms") after it was cut off"
[ -n "$at_reowned" ] || fail "(c) $victim's bundles not all owned by the others $(secs "$limit_reowned_ms") after it was cut off: $(owners | tr '\n' ' ')"
[ "$(leader)" = "$current_leader" ] || fail "(c) the leader changed from $current_leader to $(leader) when $victim was cut off"
note "(c) $victim cut off (\`network disconnect\` took $(secs "$t_cmd")): registration gone after $(secs $((at_dereg - t0))), its ${#cut[@]} bundles owned by others after $(secs $((at_reowned - t0))) (limit $(secs "$limit_reowned_ms")); polled every $(secs "$poll_round_ms")"

# Fencing, from the logs: every bundle the cut-off broker served must be logged as no longer served by it
# ("stopped serving", "not serving", "released") before any other broker logs "acquired ownership" of it.
# Each matching line gives "TIMESTAMP BUNDLE BROKER".
log_events() { # $1: service, $2: regex of the messages
  container_log "$1" | awk -v since="$t0_text" -v re="$2" '
    $1 ~ /^[0-9]+-/ && $1 >= since && $0 ~ re && match($0, /bundle="[^"]*"/) {
      bundle = substr($0, RSTART + 8, RLENGTH - 9)
      broker = "?"
      if (match($0, / broker=[^ ]*/)) broker = substr($0, RSTART + 8, RLENGTH - 8)
      print $1, bundle, broker
    }'
}
# The victim logs its fencing as its lease runs out, possibly after the others acquired: give it 3 s more.
sleep 3
stops="$(log_events "$victim_service" ' (stopped serving: |not serving: |released( |$))')"
acquires="$(for s in "${brokers[@]}"; do [ "$s" = "$victim_service" ] || log_events "$s" ' acquired ownership( |$)'; done)"
fenced_line="$(container_log "$victim_service" | awk -v since="$t0_text" '$1 ~ /^[0-9]+-/ && $1 >= since && / fenced: /' | awk 'NR == 1')"
violations=0
margins=()
for range in "${cut[@]}"; do
  bundle="$ns/$range"
  stop="$(awk -v b="$bundle" '$2 == b { print $1 }' <<<"$stops" | sort | awk 'NR == 1')"
  acquire_line="$(awk -v b="$bundle" '$2 == b' <<<"$acquires" | sort | awk 'NR == 1')"
  acquire="${acquire_line%% *}"
  by="${acquire_line##* }"
  [ -n "$acquire" ] || fail "(c) fencing: no broker logged \"acquired ownership\" of $bundle, yet the store says it is owned"
  t0_us="$(to_us "$t0_text")"
  acquire_rel="$(secs $((($(to_us "$acquire") - t0_us) / 1000)))"
  if [ -z "$stop" ]; then
    echo "   $range: NOT logged as stopped by $victim; acquired by $by at +$acquire_rel"
    violations=$((violations + 1))
    continue
  fi
  stop_rel="$(secs $((($(to_us "$stop") - t0_us) / 1000)))"
  margin_ms=$((($(to_us "$acquire") - $(to_us "$stop")) / 1000))
  margins+=("$margin_ms")
  if [[ "$stop" < "$acquire" ]]; then
    echo "   $range: stopped by $victim at +$stop_rel, acquired by $by at +$acquire_rel: fenced $(secs "$margin_ms") before"
  else
    echo "   $range: stopped by $victim at +$stop_rel, acquired by $by at +$acquire_rel: SERVED BY TWO BROKERS for $(secs $((-margin_ms)))"
    violations=$((violations + 1))
  fi
done
if [ -n "$fenced_line" ]; then
  fenced_line="${fenced_line#* }"
  echo "   $victim logged: ${fenced_line#"${fenced_line%%[! ]*}"}"
fi
margin_summary="$(printf '%s\n' "${margins[@]}" | awk 'NF { if (n == 0 || $1 < min) min = $1; if (n == 0 || $1 > max) max = $1; n++ }
  END { if (n) printf "stop-to-acquire margin min %.2f s, max %.2f s over %d bundles", min / 1000, max / 1000, n; else printf "no stop logged" }')"
if [ "$violations" -eq 0 ]; then
  note "(c) fencing: all ${#cut[@]} bundles of $victim logged as stopped before another broker acquired them ($margin_summary)"
elif [ "$fencing_mode" = warn ]; then
  warn "(c) fencing violated for $violations of ${#cut[@]} bundles of $victim ($margin_summary; negative = served by two brokers); LOADMGR_DOCKER_FENCING=warn"
else
  fail "(c) fencing violated for $violations of ${#cut[@]} bundles of $victim ($margin_summary; negative = served by two brokers). LOADMGR_DOCKER_FENCING=warn makes this a warning"
fi

# ---------------------------------------------------------------------------------------------------------------
# (d) reconnect it

taken_back() { ! is_registered "$victim" || [ "$(owners)" != "$after_partition" ] || [ -n "$(owned_by "$victim")" ]; }
after_partition="$(owners)"
echo "-- (d) docker network connect $network $victim_service"
t0="$(now_ms)"
t0_text="$(now_rfc3339)"
docker network connect --alias "$victim_service" "$network" "$victim_cid"
wait_for "$t0" "$limit_register_ms" "$victim registered again after reconnecting" is_registered "$victim"
t_rereg="$elapsed"
t1="$(now_ms)"
while [ $(($(now_ms) - t1)) -lt "$settle_ms" ]; do
  if taken_back; then
    echo "ownership before the partition:"$'\n'"$before_partition"$'\n'"before reconnecting:"$'\n'"$after_partition"$'\n'"now:"$'\n'"$(owners)" >&2
    fail "(d) after reconnecting, $victim is not registered or the ownership changed (it owns $(owned_by "$victim" | wc -l) bundles)"
  fi
  sleep 0.2
done
reacquired="$(log_events "$victim_service" ' acquired ownership( |$)' | wc -l)"
[ "$reacquired" -eq 0 ] || fail "(d) $victim logged \"acquired ownership\" $reacquired times after reconnecting"
note "(d) $victim reconnected: registered again after $(secs "$t_rereg"); owns no bundle and no owner changed for $(secs "$settle_ms") after"
reconnected_us="$(to_us "$t0_text")"

# ---------------------------------------------------------------------------------------------------------------
# (e) the serving logs: no bundle served by two brokers at the same instant

for s in "${brokers[@]}"; do
  fetch_serving_log "$s" "$s" "$(now_us)" || fail "(e) cannot copy the serving log of $s"
done
# Every interval, "BUNDLE SERVICE FIRST_US LAST_US HOW": a start matched with its stop (same bundle and token)
# is closed at the stop's last batch; an unmatched start is open, and ends at the latest at its file's end.
intervals() {
  local f service end
  for f in "$serving_dir"/*.jsonl; do
    read -r service end <"${f%.jsonl}.end"
    awk -v service="$service" -v end="$end" '
      function field(name,   v) {
        if (!match($0, "\"" name "\":(\"[^\"]*\"|-?[0-9]+)")) return ""
        v = substr($0, RSTART + length(name) + 3, RLENGTH - length(name) - 3)
        gsub(/"/, "", v)
        return v
      }
      NF { ev = field("event"); k = field("bundle") " " field("token"); at = field("atUs")
           if (ev == "start") open[k] = at
           else if (ev == "stop") { split(k, p, " "); print p[1], service, (k in open) ? open[k] : at, at, "closed"; delete open[k] } }
      END { for (k in open) { split(k, p, " "); print p[1], service, open[k], end, "open" } }' "$f"
  done | sort -k1,1 -k3,3n
}
all_intervals="$(intervals)"
# "overlap BUNDLE A A_FIRST A_LAST B B_FIRST B_LAST" for two brokers' intervals of a bundle that share an instant;
# "handover BUNDLE A A_LAST B B_FIRST" for every change of server, A's last batch before B's first one.
serving_events="$(awk '
  $1 != bundle { bundle = $1; n = 0 }
  { n++; who[n] = $2; first[n] = $3; last[n] = $4
    for (i = 1; i < n; i++) if (who[i] != $2 && last[i] >= $3) print "overlap", $1, who[i], first[i], last[i], $2, $3, $4
    if (n > 1 && who[n - 1] != $2) print "handover", $1, who[n - 1], last[n - 1], $2, $3 }' <<<"$all_intervals")"
n_intervals="$(grep -c . <<<"$all_intervals" || true)"
n_bundles="$(awk '{ print $1 }' <<<"$all_intervals" | sort -u | grep -c . || true)"
[ "$n_bundles" -ge "$bundles" ] || fail "(e) the serving logs in $serving_dir cover only $n_bundles bundles"
# The gaps between one broker's last batch and the next one's first, over the handovers from service $1 (any if
# empty) whose last batch is in [$2, $3) µs.
gaps() {
  awk -v from="$1" -v since="$2" -v until="$3" '
    $1 == "handover" && (from == "" || $3 == from) && $4 >= since && $4 < until { print ($6 - $4) / 1e6 }' <<<"$serving_events" \
    | sort -n | awk 'NR == 1 { min = $1 } { max = $1; n++ }
        END { if (n) printf "%d handover%s, gap %.2f to %.2f s", n, n == 1 ? "" : "s", min, max; else printf "no handover" }'
}
victim_served_after="$(awk -v b="$victim_service" -v t="$reconnected_us" '$2 == b && $3 >= t' <<<"$all_intervals" | grep -c . || true)"
[ "$victim_served_after" -eq 0 ] || fail "(e) $victim's serving log has $victim_served_after intervals started after it was reconnected"
overlaps="$(grep -c '^overlap' <<<"$serving_events" || true)"
awk '$1 == "overlap" { until = $5 < $8 ? $5 : $8
  printf "   %s: SERVED BY TWO BROKERS for %.3f s (%s, and %s from %.3f s before %s stopped)\n", $2, (until - $7) / 1e6, $3, $6, ($5 - $7) / 1e6, $3 }' <<<"$serving_events"
summary="$n_intervals intervals of $n_bundles bundles, $(gaps "" 0 "$(now_us)"); in (a) from the killed $old_leader, timed from its death: $(gaps "$(service_of "$old_leader")" "$killed_us" "$partitioned_us"); in (c) from the cut-off $victim: $(gaps "$victim_service" "$partitioned_us" "$reconnected_us")"
if [ "$overlaps" -eq 0 ]; then
  note "(e) serving logs: no bundle served by two brokers at once ($summary)"
elif [ "$fencing_mode" = warn ]; then
  warn "(e) serving logs: $overlaps times two brokers served a bundle at once ($summary); LOADMGR_DOCKER_FENCING=warn"
else
  fail "(e) serving logs: $overlaps times two brokers served a bundle at once ($summary). LOADMGR_DOCKER_FENCING=warn makes this a warning"
fi
