//! `loadmgr json check` (`cli::json::check`): `model::parse_json`, type detection from the keys
//! (`NodeType::detect`), JSON Schema validation and `NodeType::normalise` (the value re-written as loadmgr
//! stores it), with the type detected and with each type named (`--type`).
//!
//! Normalising is idempotent: what `normalise` writes for a type validates against that type's schema and
//! normalises to the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::cli::json::check;
use loadmgr::model::NodeType;

fuzz_target!(|data: &[u8]| {
    let _ = check(data, None);
    for t in NodeType::ALL {
        if let Ok((_, normalised)) = check(data, Some(t)) {
            match check(normalised.as_bytes(), Some(t)) {
                Ok((_, again)) => assert_eq!(
                    again, normalised,
                    "{t}: normalising loadmgr's own output changed it"
                ),
                Err(e) => panic!("{t}: loadmgr's normalised output is rejected: {e}\n{normalised}"),
            }
        }
    }
});
