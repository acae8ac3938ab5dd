//! Simulator scenarios (`loadmgr simulate --scenario FILE`): `Scenario::from_json` (JSON Schema, serde with
//! `deny_unknown_fields`, `check_limits`), then `World::from_scenario`, which generates brokers, namespaces,
//! topics, placement and the timeline and rejects what the schema cannot (duplicate ids, unknown brokers,
//! bad names or ranges).
//!
//! `from_json` enforces the product's limits (100,000 brokers, 10,000,000 bundles, 20,000,000 topics, 365
//! days). A world that large is legal but costs seconds and gigabytes to build, so the target only builds
//! worlds of at most 64 brokers, 256 bundles and 4,096 topics: the fuzzer should explore validation, not
//! memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::sim::{Scenario, World};
use loadmgr_fuzz::text;

const MAX_BROKERS: f64 = 64.0;
const MAX_BUNDLES: f64 = 256.0;
const MAX_TOPICS: f64 = 4096.0;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    let Ok(s) = Scenario::from_json(text, "fuzz.json") else {
        return;
    };
    let brokers: f64 = s.brokers.iter().map(|g| f64::from(g.count)).sum();
    let bundles: f64 = s
        .namespaces
        .iter()
        .map(|g| f64::from(g.count) * f64::from(g.bundles))
        .sum();
    let topics: f64 = s
        .namespaces
        .iter()
        .map(|g| {
            f64::from(g.count)
                * (f64::from(g.bundles) * g.topics_per_bundle)
                    .round()
                    .max(f64::from(g.bundles))
        })
        .sum();
    if brokers > MAX_BROKERS || bundles > MAX_BUNDLES || topics > MAX_TOPICS {
        return;
    }
    let _ = s.settings_text();
    let _ = World::from_scenario(&s, 7);
});
