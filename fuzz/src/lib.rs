//! Checks shared by the fuzz targets in `fuzz_targets/` (see docs/fuzzing.md).
//!
//! A target returns quietly for input that a parser rejects with an error: the fuzzer looks for panics,
//! overflows, runaway memory or time, and for values that do not survive being written back.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The round trip of a type loadmgr both reads and writes: `value` (as read from outside input) written with
/// loadmgr's writer (`model::json::to_json_vec`) must read back to an equal value, and writing that again must
/// give the same bytes.
///
/// Equality is `PartialEq`, or else equal `Debug` text: a `NaN` read from Jackson's `"NaN"` is not equal to
/// itself, but prints the same.
pub fn round_trip<T>(what: &str, value: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let written = loadmgr::model::json::to_json_vec(value);
    let back: T = serde_json::from_slice(&written).unwrap_or_else(|e| {
        panic!(
            "{what}: what loadmgr wrote does not read back: {e}\nvalue: {value:?}\nwritten: {}",
            String::from_utf8_lossy(&written)
        )
    });
    assert!(
        *value == back || format!("{value:?}") == format!("{back:?}"),
        "{what}: written and read back, the value changed\nbefore: {value:?}\nafter:  {back:?}\nwritten: {}",
        String::from_utf8_lossy(&written)
    );
    let again = loadmgr::model::json::to_json_vec(&back);
    assert!(
        written == again,
        "{what}: writing the value read back gives other bytes\nfirst:  {}\nsecond: {}",
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&again)
    );
}

/// Reads `bytes` as `T` the way the store readers do (`serde_json::from_slice`, as `MetadataStoreExt::get_json`)
/// and, when that succeeds, checks [`round_trip`].
pub fn read_and_round_trip<T>(what: &str, bytes: &[u8]) -> Option<T>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let value: T = serde_json::from_slice(bytes).ok()?;
    round_trip(what, &value);
    Some(value)
}

/// The input as UTF-8 text, or `None` (text parsers take `&str`; the bytes a fuzzer makes are mostly not text,
/// and the product reads files with `read_file_to_string`, which rejects them before any parser runs).
pub fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}
