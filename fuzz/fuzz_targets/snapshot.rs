//! Load-data snapshots (`loadmgr explain --snapshot`, `simulate --from-snapshot`): `Snapshot::from_json`
//! (schema, every embedded node against its own schema, policies), then what the commands do with a snapshot
//! that parsed: `core::explain::run` with the default settings (one shedding cycle, placement and split
//! selection through the real decision core) and its text rendering, and `World::from_snapshot` for a
//! one-minute simulation.
//!
//! A snapshot with more than 16 brokers or 64 bundles in all is only parsed: the fuzzer is here to explore
//! validation and odd values, not to time the core on big clusters (benches/ do that).
//!
//! `World::from_snapshot` finds topic names for a bundle without `bundleTopics` by trying `sim-topic-0`,
//! `sim-topic-1`, … until `min(topics, 5000)` of them hash into the bundle; for a narrow bundle that is seconds
//! of CRC32 (a bundle 1/2^20 of the hash space wants 2^20 tries a topic), bounded at 50,000,000 tries a
//! snapshot (docs/fuzzing.md). The target builds the world only when the expected number of tries is at most
//! 2,000,000, so that libFuzzer's 10 s timeout measures parsing, not this search.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::bundle::BundleName;
use loadmgr::core::explain::{self, ExplainOptions};
use loadmgr::core::snapshot::Snapshot;
use loadmgr::runtime::synthetic::CostModel;
use loadmgr::sim::World;
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    let Ok(snap) = Snapshot::from_json(text) else {
        return;
    };
    let _ = snap.to_load_data();
    let bundles: usize = snap.brokers.values().map(|b| b.last_stats.len()).sum();
    if snap.brokers.len() > 16 || bundles + snap.bundle_data.len() > 64 {
        return;
    }
    if let Ok(report) = explain::run(&snap, &ExplainOptions::default()) {
        let _ = explain::render_text(&report);
    }
    if expected_name_tries(&snap) <= 2_000_000.0 {
        let _ = World::from_snapshot(&snap, "fuzz", 1.0, CostModel::default());
    }
});

/// The tries `World::from_snapshot` expects to need to name the topics of the bundles it generates names for.
fn expected_name_tries(snap: &Snapshot) -> f64 {
    let mut tries = 0.0;
    for report in snap.brokers.values() {
        for (bundle, stats) in &report.last_stats {
            if snap
                .bundle_topics
                .get(bundle)
                .is_some_and(|t| !t.is_empty())
            {
                continue;
            }
            if let Ok(name) = BundleName::parse(bundle) {
                let range = name.range();
                let width = (range.upper() - range.lower()) as f64;
                let want = stats.topics.clamp(1, 5000) as f64;
                tries += (want * 4_294_967_296.0 / width).min(20_000_000.0);
            }
        }
    }
    tries
}
