//! Compatibility with JSON written by real Pulsar brokers and tools (`tests/golden/`, sources in
//! `tests/golden/SOURCES.md`): every sample is recognised, validates against its schema, reads with the right
//! values, and re-serialises the way a Java broker of the current shape writes it.

use std::path::PathBuf;

use loadmgr::model::json::to_json_string;
use loadmgr::model::{
    BundlesData, LeaderBroker, LoadManagerReport, LocalBrokerData, NamespaceEphemeralData,
    NodeType, ResourceQuota, TimeAverageBrokerData,
};
use serde_json::Value;

fn golden(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn keys(text: &str) -> Vec<String> {
    // serde_json keeps object keys sorted without preserve_order, so read the top-level key order by hand:
    // the key of every `"...":` at depth 1.
    let mut out = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut start) = (0i32, false, false, 0usize);
    let bytes = text.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
                let rest = text[i + 1..].trim_start();
                if depth == 1 && rest.starts_with(':') {
                    out.push(text[start..i].to_owned());
                }
            }
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                start = i + 1;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            _ => {}
        }
    }
    out
}

#[test]
fn every_golden_sample_is_detected_and_schema_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let expected: NodeType = name.split('-').next().unwrap().parse().unwrap();
        let value: Value = serde_json::from_str(&golden(&name)).unwrap();
        assert_eq!(NodeType::detect(&value).unwrap(), expected, "{name}");
        expected
            .validate(&value)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        // Normalising never fails on a real sample and gives schema-valid output.
        let normalised = expected.normalise(value).unwrap();
        expected
            .validate(&serde_json::from_str(&normalised).unwrap())
            .unwrap_or_else(|e| panic!("{name} normalised: {e}"));
        seen += 1;
    }
    assert!(seen >= 10, "expected the golden samples, found {seen}");
}

#[test]
fn pulsar_3_1_report_round_trips_byte_for_byte() {
    let text = golden("LocalBrokerData-pulsar-site-3.1.x-develop-load-manager.json");
    let data: LocalBrokerData = serde_json::from_str(&text).unwrap();
    assert_eq!(data.cpu.limit, 800.0);
    assert_eq!(data.bandwidth_in.limit, 1.0e7);
    assert_eq!(data.num_consumers, 2);
    assert_eq!(data.start_timestamp, Some(1_690_940_955_211));
    assert_eq!(
        data.advertised_listeners["internal"]
            .broker_service_url
            .as_deref(),
        Some("pulsar://broker-1:6650")
    );
    // maxResourceUsage is recomputed, not read: directMemory 36/256.
    assert_eq!(data.max_resource_usage(), 0.140625);
    assert_eq!(to_json_string(&data), text);
}

#[test]
fn pulsar_2_10_report_recomputes_max_usage_bit_exactly() {
    let text = golden("LocalBrokerData-thirdparty-notes-2.10.1.json");
    let data: LocalBrokerData = serde_json::from_str(&text).unwrap();
    assert_eq!(data.bandwidth_in.usage, -1.0);
    assert_eq!(data.max_resource_usage(), 0.10280216485261917);
    let written = to_json_string(&data);
    assert!(
        written.contains(r#""maxResourceUsage":0.10280216485261917"#),
        "{written}"
    );
    // 2.x wrote the bundleStats duplicate; the current shape does not. Everything else is the same text.
    let original: Value = serde_json::from_str(&text).unwrap();
    let mut expected = original.clone();
    expected.as_object_mut().unwrap().remove("bundleStats");
    assert_eq!(serde_json::from_str::<Value>(&written).unwrap(), expected);
    let mut expected_keys = keys(&text);
    expected_keys.retain(|k| k != "bundleStats");
    assert_eq!(keys(&written), expected_keys);
}

#[test]
fn pulsar_2_11_test_report_reads_and_keeps_its_values() {
    let text = golden("LocalBrokerData-pulsar-2.11-LocalBrokerDataTest.json");
    let data: LocalBrokerData = serde_json::from_str(&text).unwrap();
    assert_eq!(
        data.web_service_url_tls.as_deref(),
        Some("https://10.244.2.23:8081")
    );
    assert_eq!(data.pulsar_service_url, None);
    assert!(!data.non_persistent_topics_enabled);
    assert_eq!(data.memory.limit, 1228.0);
    assert_eq!(data.bundles.len(), 1);
    let written: Value = serde_json::from_str(&to_json_string(&data)).unwrap();
    let original: Value = serde_json::from_str(&text).unwrap();
    // The sample's maxResourceUsage was edited by hand in Pulsar's test (it matches no resource), so compare
    // everything but the computed keys.
    for (key, value) in original.as_object().unwrap() {
        if key == "bundleStats" || key == "maxResourceUsage" {
            continue;
        }
        assert_eq!(&written[key], value, "key {key}");
    }
    assert_eq!(original["bundleStats"], written["lastStats"]);
}

#[test]
fn partial_doc_samples_read_with_defaults() {
    let data: LocalBrokerData = serde_json::from_str(&golden(
        "LocalBrokerData-pulsar-site-develop-load-manager-partial.json",
    ))
    .unwrap();
    assert_eq!(data.cpu.limit, 2400.0);
    assert_eq!(data.bandwidth_out.usage, 5.287239583333333);
    assert!(data.persistent_topics_enabled);
    let written = to_json_string(&data);
    assert!(
        written.contains(r#""bandwidthIn":{"usage":4.256510416666667,"limit":1.024E7}"#),
        "{written}"
    );
}

#[test]
fn simple_load_manager_report_is_recognised_and_kept_whole() {
    let text = golden("LoadReport-pulsar-site-3.1.x-develop-load-manager.json");
    match LoadManagerReport::from_slice(text.as_bytes()).unwrap() {
        LoadManagerReport::Simple(report) => {
            assert_eq!(report.name.as_deref(), Some("broker-1:8080"));
            assert_eq!(report.timestamp, 1_691_042_931_108);
            assert_eq!(report.system_resource_usage.bandwidth_in.limit, 1.0e7);
            assert!(report.other.contains_key("allocatedCPU"));
            assert!(report.other.contains_key("startTimestamp"));
        }
        other => panic!("expected a Simple report, got {other:?}"),
    }
    // Normalising keeps every key of the original.
    let normalised = NodeType::LoadReport
        .normalise(serde_json::from_str(&text).unwrap())
        .unwrap();
    let (a, b): (Value, Value) = (
        serde_json::from_str(&text).unwrap(),
        serde_json::from_str(&normalised).unwrap(),
    );
    assert_eq!(a, b);
}

#[test]
fn other_node_types_round_trip() {
    let te = golden("TimeAverageBrokerData-thirdparty-notes-2.10.1.json");
    let avg: TimeAverageBrokerData = serde_json::from_str(&te).unwrap();
    assert_eq!(avg, TimeAverageBrokerData::default());
    assert_eq!(to_json_string(&avg), te);

    let own = golden("NamespaceEphemeralData-thirdparty-notes-2.10.1.json");
    let data: NamespaceEphemeralData = serde_json::from_str(&own).unwrap();
    assert_eq!(
        data.native_url.as_deref(),
        Some("pulsar://192.168.1.7:6650")
    );
    assert_eq!(to_json_string(&data), own);

    let leader = golden("LeaderBroker-thirdparty-notes-2.10.1.json");
    let l: LeaderBroker = serde_json::from_str(&leader).unwrap();
    assert_eq!(l.broker_id(), Some("192.168.1.7:8080"));
    assert_eq!(to_json_string(&l), leader);

    let quota: ResourceQuota = serde_json::from_str(&golden(
        "ResourceQuota-pulsarctl-resourcequotas-get-doc.json",
    ))
    .unwrap();
    assert_eq!(quota, ResourceQuota::pulsar_default());

    for (name, n) in [
        ("BundlesData-pulsar-site-lb-quick-start-3.json", 3),
        ("BundlesData-pulsar-site-lb-quick-start-17.json", 17),
        ("BundlesData-pulsar-site-lb-quick-start-18.json", 18),
    ] {
        let b: BundlesData = serde_json::from_str(&golden(name)).unwrap();
        assert_eq!(b.num_bundles, n);
        assert_eq!(b.boundaries.len(), n as usize + 1);
        let compact: Value = serde_json::from_str(&golden(name)).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&to_json_string(&b)).unwrap(),
            compact
        );
    }
}
