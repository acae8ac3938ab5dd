//! Load-data snapshots (`loadmgr explain --snapshot`, `simulate --from-snapshot`): `Snapshot::from_json`
//! (schema, every embedded node against its own schema, policies), then what the commands do with a snapshot
//! that parsed: `core::explain::run` with the default settings (one shedding cycle, placement and split
//! selection through the real decision core) and its text rendering, and `World::from_snapshot` for a
//! one-minute simulation.
//!
//! A snapshot with more than 16 brokers or 64 bundles in all is only parsed: the fuzzer is here to explore
//! validation and odd values, not to time the core on big clusters (benches/ do that).
#![no_main]

use libfuzzer_sys::fuzz_target;
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
    let _ = World::from_snapshot(&snap, "fuzz", 1.0, CostModel::default());
});
