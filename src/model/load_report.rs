//! The Simple load manager's `LoadReport` (read side) and the selector Pulsar applies to
//! `/loadbalance/brokers/<id>` values.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::broker::{LocalBrokerData, NamespaceBundleStats, SystemResourceUsage};
use super::json::java_double as jd;

/// A Simple-load-manager broker's report. loadmgr only reads it (the monitor shows it, the leader ignores such
/// brokers); keys it does not model are kept in [`LoadReport::other`] so a normalised copy loses nothing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LoadReport {
    /// Broker id, `host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Broker build version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker_version_string: Option<String>,
    /// `http://host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_service_url: Option<String>,
    /// `https://host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_service_url_tls: Option<String>,
    /// `pulsar://host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulsar_service_url: Option<String>,
    /// `pulsar+ssl://host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulsar_service_url_tls: Option<String>,
    /// Report time, epoch ms.
    pub timestamp: i64,
    /// msg/s in.
    #[serde(with = "jd")]
    pub msg_rate_in: f64,
    /// msg/s out.
    #[serde(with = "jd")]
    pub msg_rate_out: f64,
    /// Topics.
    pub num_topics: i32,
    /// Consumers.
    pub num_consumers: i32,
    /// Producers.
    pub num_producers: i32,
    /// Bundles.
    pub num_bundles: i32,
    /// Judged underloaded by the Simple load manager.
    pub under_loaded: bool,
    /// Judged overloaded by the Simple load manager.
    pub over_loaded: bool,
    /// Bundle → traffic.
    pub bundle_stats: BTreeMap<String, NamespaceBundleStats>,
    /// Host usage.
    pub system_resource_usage: SystemResourceUsage,
    /// Every other key, as read.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

impl LoadReport {
    /// The unweighted maximum usage of the host resources as a fraction (cpu, direct memory, NICs).
    pub fn max_resource_usage(&self) -> f64 {
        let u = &self.system_resource_usage;
        [u.cpu, u.direct_memory, u.bandwidth_in, u.bandwidth_out]
            .iter()
            .map(|r| r.percent_usage())
            .fold(0.0f32, f32::max) as f64
            / 100.0
    }
}

/// What a `/loadbalance/brokers/<id>` node holds: a modular report or a Simple one.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadManagerReport {
    /// `LocalBrokerData` (modular load manager, loadmgr).
    Modular(Box<LocalBrokerData>),
    /// `LoadReport` (Simple load manager).
    Simple(Box<LoadReport>),
}

impl LoadManagerReport {
    /// Pulsar's `LoadReportDeserializer` rule: `loadReportType == "LoadReport"` or an `underLoaded` key means a
    /// Simple `LoadReport`; anything else is read as `LocalBrokerData`.
    pub fn from_value(value: serde_json::Value) -> Result<Self, serde_json::Error> {
        if is_simple_load_report(&value) {
            Ok(Self::Simple(Box::new(serde_json::from_value(value)?)))
        } else {
            Ok(Self::Modular(Box::new(serde_json::from_value(value)?)))
        }
    }

    /// Parses node bytes with [`Self::from_value`]'s rule.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        Self::from_value(serde_json::from_slice(bytes)?)
    }
}

/// Whether a parsed broker node is a Simple-load-manager `LoadReport` (Pulsar's selector rule).
pub fn is_simple_load_report(value: &serde_json::Value) -> bool {
    value.get("loadReportType").and_then(|v| v.as_str()) == Some("LoadReport")
        || value.get("underLoaded").is_some()
}

/// Reads a broker node as a modular report; `Err` says why it is not one.
pub fn parse_report(bytes: &[u8]) -> Result<LocalBrokerData, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    if !value.is_object() {
        return Err(format!("not a JSON object but {value}"));
    }
    if is_simple_load_report(&value) {
        return Err("a Simple load manager LoadReport, not a modular LocalBrokerData".into());
    }
    serde_json::from_value(value).map_err(|e| format!("not a LocalBrokerData: {e}"))
}

/// The largest registration node read as a report, in bytes. A modular report lists every bundle's stats (a few
/// hundred bytes each), so this admits several thousand bundles per broker; ZooKeeper's own node limit
/// (`jute.maxbuffer`) is 1 MiB too.
pub const MAX_REPORT_BYTES: usize = 1024 * 1024;

/// How many times its limit a resource's usage may be before the report counts as impossible (CPU above 100 %
/// happens when a broker runs more threads than its cores; ten times the limit does not).
pub const MAX_USAGE_OVER_LIMIT: f64 = 10.0;

/// Checks a report's figures: no negative usage or limit, no usage beyond [`MAX_USAGE_OVER_LIMIT`] × a known
/// limit; `Err` names the resource and the numbers.
pub fn check_report(r: &LocalBrokerData) -> Result<(), String> {
    for (name, u) in [
        ("cpu", &r.cpu),
        ("memory", &r.memory),
        ("directMemory", &r.direct_memory),
        ("bandwidthIn", &r.bandwidth_in),
        ("bandwidthOut", &r.bandwidth_out),
    ] {
        if u.usage < 0.0 || u.limit < 0.0 {
            return Err(format!(
                "impossible {name}: usage {} and limit {} must not be negative",
                u.usage, u.limit
            ));
        }
        if u.limit > 0.0 && u.usage > MAX_USAGE_OVER_LIMIT * u.limit {
            return Err(format!(
                "impossible {name}: usage {} is more than {MAX_USAGE_OVER_LIMIT} times its limit {}",
                u.usage, u.limit
            ));
        }
    }
    Ok(())
}

/// Reads a registration node (`/loadbalance/brokers/<id>`) as a live broker's report: an ephemeral node (a
/// persistent copy of a report is no broker: nothing removes it when a broker dies) of at most
/// [`MAX_REPORT_BYTES`] holding a modular report with possible figures. `Err` says why it is not one.
pub fn read_registration(bytes: &[u8], ephemeral: bool) -> Result<LocalBrokerData, String> {
    if !ephemeral {
        return Err("not an ephemeral node, so not a live broker's registration".into());
    }
    if bytes.len() > MAX_REPORT_BYTES {
        return Err(format!(
            "{} bytes, more than the {MAX_REPORT_BYTES}-byte limit of a report",
            bytes.len()
        ));
    }
    let report = parse_report(bytes)?;
    check_report(&report)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_must_be_live_small_and_possible() {
        let ok = br#"{"webServiceUrl":"http://b:8080","cpu":{"usage":150.0,"limit":100.0}}"#;
        assert!(read_registration(ok, true).is_ok());
        assert!(read_registration(ok, false)
            .unwrap_err()
            .contains("not an ephemeral node"));
        let big = vec![b' '; MAX_REPORT_BYTES + 1];
        assert!(read_registration(&big, true)
            .unwrap_err()
            .contains("1048576-byte limit"));
        let negative = br#"{"cpu":{"usage":10.0,"limit":-4.0}}"#;
        assert!(read_registration(negative, true)
            .unwrap_err()
            .contains("impossible cpu"));
        let beyond = br#"{"memory":{"usage":50000.0,"limit":1000.0}}"#;
        assert!(read_registration(beyond, true)
            .unwrap_err()
            .contains("impossible memory: usage 50000 is more than 10 times its limit 1000"));
        let unknown_limit = br#"{"memory":{"usage":50000.0,"limit":0.0}}"#;
        assert!(read_registration(unknown_limit, true).is_ok());
    }

    #[test]
    fn reports_are_checked() {
        assert!(parse_report(b"{oops").unwrap_err().starts_with("not JSON"));
        assert!(parse_report(b"[1]")
            .unwrap_err()
            .contains("not a JSON object"));
        assert!(parse_report(br#"{"cpu":{"usage":"high"}}"#)
            .unwrap_err()
            .contains("not a LocalBrokerData"));
        assert!(parse_report(br#"{"underLoaded":true,"allocatedCPU":1}"#)
            .unwrap_err()
            .contains("Simple"));
        let r = parse_report(br#"{"webServiceUrl":"http://b:8080","numBundles":2}"#).unwrap();
        assert_eq!(r.num_bundles, 2);
    }

    #[test]
    fn selector_follows_pulsar() {
        let simple = LoadManagerReport::from_slice(br#"{"name":"b:8080","underLoaded":true,"systemResourceUsage":{"cpu":{"usage":50.0,"limit":200.0}}}"#).unwrap();
        match simple {
            LoadManagerReport::Simple(r) => {
                assert!(r.under_loaded);
                assert_eq!(r.max_resource_usage(), 0.25);
            }
            other => panic!("{other:?}"),
        }
        let typed =
            LoadManagerReport::from_slice(br#"{"loadReportType":"LoadReport","allocatedCPU":1.5}"#)
                .unwrap();
        match typed {
            LoadManagerReport::Simple(r) => assert_eq!(r.other["allocatedCPU"], 1.5),
            other => panic!("{other:?}"),
        }
        let modular = LoadManagerReport::from_slice(
            br#"{"cpu":{"usage":1.0,"limit":4.0},"loadReportType":"LocalBrokerData"}"#,
        )
        .unwrap();
        assert!(matches!(modular, LoadManagerReport::Modular(_)));
    }
}
