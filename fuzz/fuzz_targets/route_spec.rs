//! `loadmgr route simulate`: the `--targets` file (`routing::simulate::SimSpec`, read as `cli::route::load_spec`
//! reads it after the file: serde with `deny_unknown_fields`, then `validate`) and `--duration`
//! (`cli::route::parse_duration`). A spec that validates is simulated for 200 ms when it is small (at most 16
//! targets and 10,000 msg/s: the product allows 10,000,000 msg/s, which is seconds of work, not a bug).
//! The spec is also printed by loadmgr (serde_json), so it must round-trip.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use loadmgr::cli::route::parse_duration;
use loadmgr::routing::simulate::{simulate, SimOptions, SimSpec};
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    if let Ok(d) = parse_duration(text) {
        assert!(d <= loadmgr::routing::simulate::MAX_DURATION);
    }
    let Ok(spec) = serde_json::from_str::<SimSpec>(text) else {
        return;
    };
    let written = serde_json::to_string(&spec).expect("a spec serialises");
    let back: SimSpec = serde_json::from_str(&written)
        .unwrap_or_else(|e| panic!("a written spec does not read back: {e}\n{written}"));
    assert!(
        back == spec || format!("{back:?}") == format!("{spec:?}"),
        "{written}"
    );
    if spec.validate().is_err() {
        return;
    }
    let small = spec.targets.len() <= 16
        && spec.traffic.base_rate <= 10_000.0
        && spec.traffic.burst_rate <= 10_000.0;
    if small {
        let _ = simulate(&spec, &SimOptions::new(Duration::from_millis(200), 1));
    }
});
