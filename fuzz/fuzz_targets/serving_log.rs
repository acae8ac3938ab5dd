//! The synthetic host's serving log (JSON lines, `runtime::synthetic::read_serving_log`), which the cluster
//! tests read back to check that no two hosts served a bundle at once. Every event read must round-trip
//! through the writer the host uses (`serde_json::to_vec`, one line an event).
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadmgr::runtime::synthetic::{read_serving_log, ServingEvent};
use loadmgr_fuzz::text;

fuzz_target!(|data: &[u8]| {
    let Some(text) = text(data) else { return };
    let Ok(events) = read_serving_log(text) else {
        return;
    };
    let mut written = String::new();
    for e in &events {
        written.push_str(&serde_json::to_string(e).expect("events serialise"));
        written.push('\n');
    }
    let back: Vec<ServingEvent> = read_serving_log(&written)
        .unwrap_or_else(|e| panic!("the written log does not read back: {e}\n{written}"));
    assert_eq!(back, events, "the log changed when written and read back");
});
