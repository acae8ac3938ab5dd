//! The foundation commands end to end, through the real binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn loadmgr(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(args)
        .output()
        .expect("run loadmgr")
}

fn loadmgr_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run loadmgr");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

#[test]
fn bundles_boundaries() {
    let o = loadmgr(&["bundles", "boundaries", "4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"boundaries\":[\"0x00000000\",\"0x40000000\",\"0x80000000\",\"0xc0000000\",\"0xffffffff\"],\"numBundles\":4}\n"
    );
    let o = loadmgr(&["bundles", "boundaries", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("invalid number of bundles 0"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bundles_lookup() {
    let o = loadmgr(&[
        "bundles",
        "lookup",
        "--count",
        "4",
        "persistent://public/default/my-topic",
        "my-topic-partition-1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "persistent://public/default/my-topic\t0x00000000_0x40000000\t0x2bad45f7\n\
         persistent://public/default/my-topic-partition-1\t0x40000000_0x80000000\t0x4a4c72a3\n"
    );
    let o = loadmgr(&["bundles", "lookup", "--count", "4", "ftp://x/y/z"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("invalid topic name 'ftp://x/y/z'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bundles_split_each_algorithm() {
    let o = loadmgr(&[
        "bundles",
        "split",
        "0x00000000_0xffffffff",
        "--algorithm",
        "range_equally_divide",
    ]);
    assert_eq!(stdout(&o), "0x00000000_0x7fffffff\n0x7fffffff_0xffffffff\n");

    let positions = [
        "bundles",
        "split",
        "0x40000000_0x80000000",
        "--algorithm",
        "specified_positions_divide",
        "--position",
        "0x60000000",
        "--position",
        "0x50000000",
        "--position",
        "0x90000000",
        "--topic",
        "my-topic-partition-1",
        "--topic",
        "my-topic-partition-5",
    ];
    let o = loadmgr(&positions);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "0x40000000_0x50000000\n0x50000000_0x60000000\n0x60000000_0x80000000\n"
    );
    // A topic that hashes elsewhere (my-topic is 0x2bad45f7) is refused, naming it.
    let mut outside = positions.to_vec();
    outside.extend(["--topic", "my-topic"]);
    let o = loadmgr(&outside);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("topic 'persistent://public/default/my-topic' hashes to 0x2bad45f7, outside bundle 0x40000000_0x80000000"),
        "{}",
        stderr(&o)
    );

    // topic_count with a single topic: no split, the range is printed and the reason goes to stderr.
    let o = loadmgr(&[
        "bundles",
        "split",
        "0x00000000_0x40000000",
        "--algorithm",
        "topic_count_equally_divide",
        "--topic",
        "my-topic",
    ]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "0x00000000_0x40000000\n");
    assert!(
        stderr(&o).contains("no split: topic_count_equally_divide needs at least 2 topics"),
        "{}",
        stderr(&o)
    );

    // flow_or_qps from a stats file.
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("stats.json");
    let topics: Vec<String> = (0..4).map(|i| format!("persistent://t/ns/t{i}")).collect();
    let body: serde_json::Map<String, serde_json::Value> = topics
        .iter()
        .map(|t| {
            (
                t.clone(),
                serde_json::json!({"msgRate": 20000.0, "throughput": 1.0}),
            )
        })
        .collect();
    std::fs::write(&stats, serde_json::Value::Object(body).to_string()).unwrap();
    let o = loadmgr(&[
        "bundles",
        "split",
        "0x00000000_0xffffffff",
        "--algorithm",
        "flow_or_qps_equally_divide",
        "--topic-stats",
        stats.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // 4 topics of 20000 msg/s against a 30000 maximum: one topic per child.
    assert_eq!(stdout(&o).lines().count(), 4, "{}", stdout(&o));

    for (args, needle) in [
        (
            vec![
                "bundles",
                "split",
                "0x80000000_0x40000000",
                "--algorithm",
                "range_equally_divide",
            ],
            "lower bound must be below",
        ),
        (
            vec![
                "bundles",
                "split",
                "0x00000000_0xffffffff",
                "--algorithm",
                "halves",
            ],
            "unknown split algorithm 'halves'",
        ),
        (
            vec![
                "bundles",
                "split",
                "0x00000000_0xffffffff",
                "--algorithm",
                "specified_positions_divide",
            ],
            "needs at least one --position",
        ),
        (
            vec![
                "bundles",
                "split",
                "0x00000000_0xffffffff",
                "--algorithm",
                "specified_positions_divide",
                "--position",
                "0x1ffffffff",
            ],
            "above 0xffffffff",
        ),
    ] {
        let o = loadmgr(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn json_check_detects_validates_and_normalises() {
    let o = loadmgr_stdin(
        &["json", "check", "-"],
        r#"{"cpu":{"usage":37.5,"limit":400},"bandwidthIn":{"usage":5120,"limit":10485760}}"#,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o).trim(), "LocalBrokerData");
    let out = stdout(&o);
    assert!(
        out.contains(r#""bandwidthIn":{"usage":5120.0,"limit":1.048576E7}"#),
        "{out}"
    );
    assert!(out.contains(r#""maxResourceUsage":0.09375"#), "{out}");

    let o = loadmgr_stdin(
        &["json", "check", "--type", "BundleData", "-"],
        r#"{"shortTermData":{"maxSamples":"ten","numSamples":1}}"#,
    );
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("/shortTermData/maxSamples"), "{err}");

    let o = loadmgr_stdin(&["json", "check", "-"], "{\"cpu\": ");
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not valid JSON"), "{}", stderr(&o));

    let o = loadmgr_stdin(&["json", "check", "-"], r#"{"mystery":1}"#);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--type"), "{}", stderr(&o));

    let o = loadmgr(&["json", "check", "/nonexistent/file.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("cannot read /nonexistent/file.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn config_check_prints_sorted_settings_and_reports_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("broker.conf");
    std::fs::write(&good, "# ours\nloadBalancerLoadSheddingStrategy=ThresholdShedder\nmanagedLedgerMaxEntriesPerLedger=50000\n").unwrap();
    let o = loadmgr(&["config", "check", good.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted);
    assert!(lines.contains(&"loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"));
    assert!(lines.contains(&"loadBalancerLoadPlacementStrategy=org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate"));
    assert!(lines.contains(&"maxUnloadPercentage=0.5"));
    let err = stderr(&o);
    assert!(
        err.contains("warning: ")
            && err.contains(":3: unknown key managedLedgerMaxEntriesPerLedger"),
        "{err}"
    );

    let bad = dir.path().join("bad.conf");
    std::fs::write(
        &bad,
        "\nloadBalancerBrokerOverloadedThresholdPercentage=high\n",
    )
    .unwrap();
    let o = loadmgr(&["config", "check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}:2: invalid value 'high' for loadBalancerBrokerOverloadedThresholdPercentage",
            bad.display()
        )),
        "{err}"
    );
}

#[test]
fn config_check_reports_timeouts_and_intervals_that_cannot_work() {
    let dir = tempfile::tempdir().unwrap();
    for (text, message) in [
        (
            "metadataStoreSessionTimeoutMillis=-1\n",
            "metadataStoreSessionTimeoutMillis must be > 0, got -1",
        ),
        (
            "metadataStoreOperationTimeoutSeconds=-30\n",
            "metadataStoreOperationTimeoutSeconds must be > 0, got -30",
        ),
        (
            "loadmgrSheddingIntervalMillis=-500\n",
            "loadmgrSheddingIntervalMillis must be >= 0 (0 = use loadBalancerSheddingIntervalMinutes), got -500",
        ),
    ] {
        let file = dir.path().join("broker.conf");
        std::fs::write(&file, text).unwrap();
        let o = loadmgr(&["config", "check", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{text}");
        let err = stderr(&o);
        assert!(
            err.contains(&format!("{}:1: {message}", file.display())),
            "{err}"
        );
    }
}

#[test]
fn every_subcommand_has_help_with_an_example() {
    for args in [
        vec!["bundles", "boundaries", "--help"],
        vec!["bundles", "lookup", "--help"],
        vec!["bundles", "split", "--help"],
        vec!["json", "check", "--help"],
        vec!["config", "check", "--help"],
        vec!["bench", "cluster", "--help"],
    ] {
        let o = loadmgr(&args);
        assert!(o.status.success(), "{args:?}");
        assert!(stdout(&o).contains("Example"), "{args:?}: {}", stdout(&o));
    }
}

/// docs/openapi.json is what the code generates: regenerate it with `loadmgr openapi > docs/openapi.json`.
#[test]
fn the_committed_openapi_document_is_the_generated_one() {
    let out = loadmgr(&["openapi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/openapi.json")).unwrap();
    assert!(
        stdout(&out) == committed,
        "docs/openapi.json is stale: run `loadmgr openapi > docs/openapi.json`"
    );
    let doc: serde_json::Value = serde_json::from_str(&committed).unwrap();
    for path in [
        "/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}",
        "/admin/v2/{domain}/{tenant}/{namespace}/{topic}/partitions",
        "/admin/v2/brokers/{cluster}",
        "/admin/v2/namespaces/{tenant}/{namespace}/{bundle}/split",
        "/metrics",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
}
