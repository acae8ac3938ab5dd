//! `broker.conf`: `config::parse_properties` (Java properties rules) and `Settings::from_text`, the path of
//! `Settings::load` (`loadmgr config check`, `broker --config`, `explain --config`) after the file is read.
//!
//! Invariants: every property's value is trimmed and its line is within the text; the effective settings that
//! load, written back as `key=value` lines (`Settings::entries`, what `config check` prints), load again to
//! the same entries (`config::format_property`, how `config check` prints them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::config::{format_property, parse_properties, Settings};
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    let lines = text.lines().count();
    for p in parse_properties(text) {
        assert!(p.line >= 1 && p.line <= lines, "line {} of {lines}", p.line);
        // A key may start or end with white space written as `\ `; a value is trimmed after its escapes.
        assert_eq!(p.value, p.value.trim(), "untrimmed value");
    }
    let Ok(loaded) = Settings::from_text(text, "fuzz.conf") else {
        return;
    };
    let entries = loaded.settings.entries();
    let written: String = entries
        .iter()
        .map(|(k, v)| format_property(k, v) + "\n")
        .collect();
    match Settings::from_text(&written, "written.conf") {
        Ok(again) => assert_eq!(
            again.settings.entries(),
            entries,
            "the effective settings, written back, load to others\n{written}"
        ),
        Err(e) => panic!("the effective settings, written back, do not load: {e}\n{written}"),
    }
});
