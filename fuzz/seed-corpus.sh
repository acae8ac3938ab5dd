#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ with real inputs from the repository: the Pulsar JSON of tests/golden/, the
# examples/ snapshot (whole, and its brokers, bundle windows and time averages one a file), the built-in
# scenarios, docker/conf/, and the strings the unit tests use. The committed corpora started from these and
# were then grown by fuzzing and minimised (`cargo fuzz cmin`); run this only to start a corpus afresh or to
# add a new target's seeds. Needs jq. Files are named seed-*, so a re-run overwrites only seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
C=fuzz/corpus

put() { # put TARGET NAME TEXT
    mkdir -p "$C/$1"
    printf '%s' "$3" >"$C/$1/seed-$2"
}
copy() { # copy TARGET FILE...
    local t=$1
    shift
    mkdir -p "$C/$t"
    for f in "$@"; do cp "$f" "$C/$t/seed-$(basename "$f")"; done
}
each() { # each TARGET JQ-PATH PREFIX: every value of an object in examples/snapshot.json, one a file
    local i=0
    mkdir -p "$C/$1"
    while IFS= read -r line; do
        printf '%s' "$line" >"$C/$1/seed-$3-$i.json"
        i=$((i + 1))
    done < <(jq -c "$2 | to_entries[] | .value" examples/snapshot.json)
}

# Broker reports.
copy broker_report tests/golden/LocalBrokerData-*.json tests/golden/LoadReport-*.json
each broker_report .brokers snapshot-broker
put broker_report unit-registration '{"webServiceUrl":"http://b:8080","cpu":{"usage":150.0,"limit":100.0}}'
put broker_report unit-simple '{"name":"b:8080","underLoaded":true,"systemResourceUsage":{"cpu":{"usage":50.0,"limit":200.0}}}'
put broker_report unit-typed '{"loadReportType":"LoadReport","allocatedCPU":1.5}'
put broker_report unit-nan '{"cpu":{"usage":"NaN","limit":"Infinity"},"msgRateIn":"-Infinity","lastStats":{"t/n/0x00000000_0xffffffff":{"msgRateIn":1.024E7,"topics":3}}}'

# Bundle windows, time averages, quotas.
copy load_windows tests/golden/TimeAverageBrokerData-*.json tests/golden/ResourceQuota-*.json
each load_windows .bundleData snapshot-bundle
put load_windows unit-bundle '{"shortTermData":{"maxSamples":10,"numSamples":3,"msgRateIn":5.0},"longTermData":{"maxSamples":1000,"numSamples":0},"topics":4}'
put load_windows unit-window '{"maxSamples":10,"numSamples":10,"msgThroughputIn":1.0E-4,"msgRateOut":"NaN"}'
put load_windows unit-quota '{"msgRateIn":40.0,"msgRateOut":120.0,"bandwidthIn":100000.0,"bandwidthOut":300000.0,"memory":80.0,"dynamic":true}'

# Namespace, ownership and cluster policy nodes.
copy namespace_nodes tests/golden/LeaderBroker-*.json tests/golden/NamespaceEphemeralData-*.json \
    tests/golden/BundlesData-*.json
put namespace_nodes unit-leader '{"brokerId":"b1:8080","serviceUrl":"http://b1:8080"}'
put namespace_nodes unit-owner '{"nativeUrl":"pulsar://b1:6650","httpUrl":"http://b1:8080","disabled":false,"advertisedListeners":{"internal":{"brokerServiceUrl":"pulsar://10.0.0.1:6650"}}}'
put namespace_nodes unit-local-policies '{"bundles":{"boundaries":["0x00000000","0xffffffff"],"numBundles":1},"namespaceAntiAffinityGroup":"g","futureKey":{"x":1}}'
put namespace_nodes unit-policies '{"bundles":{"boundaries":["0x00000000","0x40000000","0x80000000","0xc0000000","0xffffffff"],"numBundles":4},"replication_clusters":["c1"]}'
put namespace_nodes unit-failure-domain '{"brokers":["b:8080","a:8080"],"extra":1}'
put namespace_nodes unit-isolation '{"p1":{"namespaces":["tenant/ns-.*"],"primary":["broker-[12]"],"secondary":["broker-3"],"auto_failover_policy":{"policy_type":"min_available","parameters":{"min_limit":"2","usage_threshold":"80"}}},"bad-regex":{"namespaces":["("],"primary":[]}}'

# loadmgr's own records (the shapes of metadata-schemas/BundleAssignment, AdminRequest, LeaderStatus).
put loadmgr_records assignment '{"bundle":"public/default/0x00000000_0x40000000","destination":"b2:8080","state":"assigning","source":"b1:8080","cause":"shedding","reason":"AvgShedder: b1 80.0% vs b2 10.0%","leader":"b1:8080","createdMs":1700000000000,"updatedMs":1700000000500}'
put loadmgr_records assignment-split '{"bundle":"t/n/0x00000000_0x80000000","destination":"b1:8080","state":"assigned","cause":"split","reason":"split","leader":"b1:8080","createdMs":1,"updatedMs":2,"unloadAfterAcquire":true}'
put loadmgr_records request-lookup '{"op":"lookup","topic":"persistent://a/b/c","requester":"x","createdMs":1}'
put loadmgr_records request-unload '{"op":"unload","bundle":"t/n/0x00000000_0xffffffff","destination":"b2:8080","target":"b1:8080","requester":"loadmgr-admin@h","createdMs":5,"response":{"ok":true,"message":"done","result":{"bundle":"x","broker":"b1:8080","owned":true},"answeredBy":"b1:8080","answeredMs":6}}'
put loadmgr_records request-split '{"op":"split","bundle":"t/n/0x00000000_0xffffffff","algorithm":"specified_positions_divide","positions":["0x10000000"],"unload":true,"requester":"x","createdMs":1}'
put loadmgr_records request-split-points '{"op":"splitPoints","bundle":"t/n/0x00000000_0xffffffff","algorithm":"topic_count_equally_divide","requester":"b1:8080","createdMs":1,"response":{"ok":true,"message":"","result":["0x7fffffff"],"answeredBy":"b2:8080","answeredMs":2}}'
put loadmgr_records request-unload-namespace '{"op":"unloadNamespace","namespace":"public/default","requester":"x","createdMs":1}'
put loadmgr_records leader-status '{"leader":"b1:8080","leadingSinceMs":1,"updatedMs":2,"reportsApplied":10,"malformedReports":1,"sheddingCycles":3,"movesStarted":2,"movesCompleted":2,"splits":0,"flushes":5,"requestsAnswered":1}'
put loadmgr_records lookup-answer '{"bundle":"t/n/0x00000000_0xffffffff","broker":"b1:8080","owned":false}'

# `json check`: every golden node.
copy node_check tests/golden/*.json

# broker.conf.
copy broker_conf docker/conf/broker.conf
put broker_conf unit-continuation "$(printf '# comment\n! also a comment\nloadBalancerSheddingEnabled = true\nloadBalancerLoadSheddingStrategy:org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\nloadBalancerBrokerThresholdShedderPercentage 10\nsupportedNamespaceBundleSplitAlgorithms=range_equally_divide,\\\n   topic_count_equally_divide\nloadBalancerNamespaceBundleMaxTopics=\n')"
put broker_conf unit-pairing "$(printf 'loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgShedder\nloadBalancerLoadPlacementStrategy=org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate\nloadBalancerBrokerOverloadedThresholdPercentage=85\nmaxUnloadPercentage=0.2\n')"

# The dynamic configuration map.
put dynamic_config unit-mixed '{"loadBalancerSheddingEnabled":"false","loadBalancerBrokerOverloadedThresholdPercentage":70,"maxUnloadPercentage":"7","loadBalancerAvgShedderLowThreshold":"20","loadBalancerEnabled":"false","managedLedgerMaxEntriesPerLedger":5}'
put dynamic_config unit-strategy '{"loadBalancerLoadSheddingStrategy":"org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder","loadBalancerBrokerThresholdShedderPercentage":"5"}'
put dynamic_config unit-array '["loadBalancerSheddingEnabled","false"]'

# Hashes, ranges and names.
for s in 0x7fffffff 0XFFFFFFFF '#ff' 017 4294967295 0x100000000 0x40000000_0x80000000 0x00000000_0xffffffff \
    public/default/0x00000000_0x40000000 pulsar/c1/10.0.0.1:8080/0x00000000_0xffffffff public/default \
    pulsar/c1/ns persistent://public/default/t1 non-persistent://t/n/a/b my-topic t/n/x-partition-3 \
    persistent://prop/cluster/ns/t range_equally_divide specified_positions_divide; do
    put bundle_names "$(printf '%s' "$s" | tr '/:#' '___')" "$s"
done

# Snapshots, scenarios, profiles.
copy snapshot examples/snapshot.json
copy scenario scenarios/*.json
copy synthetic_profile docker/conf/profile.json
put synthetic_profile unit-range '{"cores":4,"nicSpeedGbps":10,"batchIntervalMs":100,"topics":[{"name":"persistent://public/demo/t-{0..15}","msgRateIn":100,"msgRateOut":100,"msgSizeBytes":1024,"producers":1,"consumers":1}]}'

# Store URLs.
for s in memory: memory:sim memory://sim zk:h1:2181,h2:2182/pulsar 127.0.0.1:2181 zk://h:1/ \
    etcd:http://a:2379,https://b:2379,c:1 'etcd:' 'zk:h:1/bad//path'; do
    put store_url "$(printf '%s' "$s" | tr '/:,' '___')" "$s"
done

# Serving logs.
put serving_log unit-log "$(printf '%s\n' \
    '{"event":"start","bundle":"public/demo/0x00000000_0xffffffff","token":7,"atUs":1700000000000000}' \
    '{"event":"stop","bundle":"public/demo/0x00000000_0xffffffff","token":7,"atUs":1700000000100000,"batches":2,"why":"lease lapsed"}' \
    '' \
    '{"event":"start","bundle":"public/demo/0x00000000_0xffffffff","token":9,"atUs":1700000000200000}')"

# What a broker reads from the host.
put host_usage proc-stat "$(printf 'cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\nintr 1\n')"
put host_usage cpu-max '200000 100000'
put host_usage cpu-max-unlimited 'max 100000'
put host_usage cpu-stat "$(printf 'usage_usec 1234\nuser_usec 1\n')"
put host_usage meminfo "$(printf 'MemTotal:       16384000 kB\nMemFree:  100 kB\nMemAvailable:    4096000 kB\n')"

# `route simulate`: a --targets file and durations.
put route_spec unit-spec '{"source":{"host":"h1","worker":"w1","rack":"r1"},"targets":[{"id":1,"host":"h1","worker":"w1","capacity":500},{"id":2,"capacity":800,"queueCapacity":64}]}'
put route_spec unit-traffic '{"source":{"host":"h1","worker":"w1"},"targets":[{"id":1,"host":"h2","worker":"w2","rack":"r2","capacity":3000}],"traffic":{"baseRate":3000.0,"burstRate":9000.0,"firstBurstSecs":0.1,"burstEverySecs":0.1,"burstSecs":0.05}}'
for s in 60s 5m 1h 250ms 0; do put route_spec "duration-$s" "$s"; done
