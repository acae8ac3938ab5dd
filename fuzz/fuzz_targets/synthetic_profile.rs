//! Synthetic traffic profiles (`loadmgr broker --synthetic FILE`): `SyntheticProfile::from_json`, which
//! checks every number and expands `{A..B}` topic ranges (at most 100,000 topics a range).
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::runtime::synthetic::SyntheticProfile;
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    let _ = SyntheticProfile::from_json(text, "fuzz.json");
});
