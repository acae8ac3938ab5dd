//! `/loadbalance/brokers/<id>`: a broker's load report, through every path that reads one.
//!
//! * `model::load_report::read_registration` (the leader's intake: size limit, Simple-vs-modular rule,
//!   `check_report`) and `parse_report`;
//! * `routing::BrokerReport::parse` (the router's read: `LoadManagerReport::from_slice`, Pulsar's
//!   `LoadReportDeserializer` rule, then the host and the maximum usage of either kind);
//! * `serde_json::from_slice::<LoadReport>` (the monitor's read of a Simple report).
//!
//! `LocalBrokerData` is written by loadmgr: whatever reads must survive the round trip. Its computed keys
//! (`maxResourceUsage`, `loadReportType`) are written but not read, and the 2.x `bundleStats` duplicate is
//! read but not written: the comparison is on the typed value, so neither counts as a mismatch.
//! `LoadReport` is only read by loadmgr, but `loadmgr json check` re-writes it (`NodeType::normalise`), so it
//! must round-trip too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::model::load_report::{parse_report, read_registration};
use loadmgr::model::{LoadReport, LocalBrokerData};
use loadmgr::routing::BrokerReport;
use loadmgr_fuzz::{read_and_round_trip, round_trip};

fuzz_target!(|data: &[u8]| {
    let _ = read_registration(data, true);
    if let Ok(report) = parse_report(data) {
        round_trip("LocalBrokerData", &report);
        let _ = report.max_resource_usage();
        let _ = report.host();
    }
    let _ = BrokerReport::parse(data);
    let _ = read_and_round_trip::<LocalBrokerData>("LocalBrokerData", data);
    let _ = read_and_round_trip::<LoadReport>("LoadReport", data);
});
