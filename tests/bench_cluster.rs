//! `loadmgr bench cluster` end to end against a real ZooKeeper, at a size that runs in seconds: every phase
//! runs and gives figures that are consistent with each other (a smoke test; the figures themselves are in
//! docs/benchmarks.md).

use std::process::Command;

use loadmgr::testing::servers::ZkServer;

#[test]
fn every_phase_runs_and_reports_consistent_figures() {
    let zk = ZkServer::start();
    let out = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args([
            "bench",
            "cluster",
            "--store",
            &zk.url(),
            "--brokers",
            "4",
            "--bundles",
            "200",
            "--namespaces",
            "3",
            "--steady-seconds",
            "3",
            "--report-interval-ms",
            "2000",
            "--flush-interval-ms",
            "1500",
            "--shedding-interval-ms",
            "2000",
            "--flush-rounds",
            "1",
            "--session-timeout-ms",
            "4000",
            "--phase-timeout-seconds",
            "120",
            "--json",
        ])
        .output()
        .expect("run loadmgr");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench failed: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["brokers"], 4);
    assert_eq!(v["bundles"], 200);
    assert_eq!(v["namespaces"], 3);
    let num = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_f64())
            .unwrap_or_else(|| panic!("{p} missing in {v}"))
    };
    assert!(num("/registrationSeconds") > 0.0);
    // Every bundle was looked up and owned: a positive rate, ordered percentiles, writes for each lookup (the
    // leader writes records 16 to a batch, but each ownership node is a transaction of its owner's session:
    // at least 1 per lookup).
    assert!(num("/coldStart/lookupsPerSecond") > 0.0);
    assert!(num("/coldStart/p50Ms") <= num("/coldStart/p99Ms"));
    assert!(num("/coldStart/writesPerLookup") >= 1.0, "{v}");
    assert!(num("/coldStart/bytesPerLookup") > 0.0);
    // Reports every 2 s from 4 brokers over 3 s: some were written and aggregated.
    assert!(num("/steady/reportWritesPerSecond") > 0.0, "{v}");
    assert!(num("/steady/lagSamples") > 0.0, "{v}");
    assert!(num("/steady/lagP50Ms") <= num("/steady/lagP99Ms"));
    assert!(num("/steady/processRssMiB") > 0.0);
    // The flush after the traffic change wrote nodes, and so did the raw batch.
    assert!(num("/flush/nodes") > 0.0, "{v}");
    assert!(num("/flush/flushMs/median") > 0.0 && num("/flush/rawBatchMs/median") > 0.0);
    // A crashed leader's successor is elected only after the session expired, then loads, then decides.
    let elected = num("/failover/electedSeconds");
    assert!(
        elected > 2.0,
        "elected before the session could expire: {v}"
    );
    assert!(elected <= num("/failover/loadedSeconds"));
    assert!(num("/failover/loadedSeconds") <= num("/failover/firstDecisionSeconds"));
    assert!(num("/failover/firstDecisionSeconds") <= num("/failover/recoveredSeconds"));
    assert!(num("/fullRestartSeconds") > 0.0);
}

#[test]
fn bad_arguments_are_refused_with_the_flag_named() {
    let out = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(["bench", "cluster", "--store", "memory:x", "--brokers", "1"])
        .output()
        .expect("run loadmgr");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--brokers"));
}
