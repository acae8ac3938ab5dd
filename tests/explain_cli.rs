//! `loadmgr explain` end to end on the example snapshot.

use std::process::Command;

fn explain(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_loadmgr"))
        .arg("explain")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs")
}

#[test]
fn explains_the_example_snapshot() {
    let out = explain(&["--snapshot", "examples/snapshot.json", "--cycles", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("AvgShedder shedding, AvgShedder placement, 2 cycle(s)"),
        "{text}"
    );
    assert!(
        text.contains(
            "[cycle 2] public/default/0x00000000_0x20000000: broker-1:8080 -> broker-2:8080"
        ),
        "{text}"
    );

    let out = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--cycles",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["unloads"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["unloads"][1]["bundle"],
        "public/default/0x60000000_0x80000000"
    );
    assert!(v["skipped"].is_array() && v["splits"].is_array());

    let out = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--strategy",
        "ThresholdShedder",
    ]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout)
        .contains("ThresholdShedder shedding, LeastLongTermMessageRate placement"));
}

#[test]
fn bad_input_fails_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"now": 1, "brokers": {"b:1": {"numTopics": "many"}}}"#,
    )
    .unwrap();
    let out = explain(&["--snapshot", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/brokers/b:1/numTopics"), "{err}");
    let out = explain(&["--snapshot", "examples/snapshot.json", "--strategy", "Nope"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown --strategy Nope"));
}

#[test]
fn cycles_and_snapshot_size_are_bounded() {
    let out = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--cycles",
        "1000001",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cycles 1000001 is above the limit of 1000000"),
        "{err}"
    );
    #[cfg(unix)]
    {
        let out = explain(&["--snapshot", "/dev/zero"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(
                "cannot read /dev/zero: larger than the input limit of 64 MiB (67108864 bytes)"
            ),
            "{err}"
        );
    }
}

#[test]
fn candidates_show_what_placement_dropped() {
    let base = [
        "--snapshot",
        "examples/placement-keeps-owner.json",
        "--strategy",
        "ThresholdShedder",
        "--placement",
        "LeastLongTermMessageRate",
    ];
    let out = explain(&base);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Unloads (0):"), "{text}");
    assert!(!text.contains("Shedder candidates"), "{text}");
    assert!(
        text.contains("  t/n/0x00000000_0x80000000 [dropped: currentOwner]: no unload: "),
        "{text}"
    );

    let out = explain(&[&base[..], &["--candidates"]].concat());
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "Shedder candidates, before placement (2):\n  [cycle 1] t/n/0x00000000_0x80000000: a:8080 -> (placement decides)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("      => dropped by placement: currentOwner\n"),
        "{text}"
    );

    let out = explain(&[&base[..], &["--candidates", "--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let candidates = v["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 2);
    assert_eq!(candidates[0]["bundle"], "t/n/0x00000000_0x80000000");
    assert_eq!(candidates[0]["source"], "a:8080");
    assert!(candidates[0]["planned"].is_null());
    assert_eq!(candidates[0]["dropped"], "currentOwner");
    assert!(candidates[0]["reason"]
        .as_str()
        .unwrap()
        .starts_with("ThresholdShedder: a:8080 usage 80.0%"));
    let dropped: Vec<&serde_json::Value> = v["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k.get("dropped").is_some())
        .collect();
    assert_eq!(dropped.len(), 2);
    assert!(dropped.iter().all(|k| k["dropped"] == "currentOwner"));

    let out = explain(&[&base[..], &["--json"]].concat());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("candidates").is_none(), "only with --candidates");
}

/// BandShedder's plan shows every broker's predicted score before and after, and each move its reason with the
/// alternative it beat.
#[test]
fn band_shedder_shows_its_prediction() {
    let out = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--strategy",
        "BandShedder",
        "--cycles",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("BandShedder shedding, BandShedder placement"),
        "{text}"
    );
    assert!(
        text.contains("Predicted scores, now -> after the plan"),
        "{text}"
    );
    assert!(text.contains("broker-1:8080: 85.0 -> "), "{text}");
    assert!(text.contains("next best: "), "{text}");
    assert!(
        text.contains("the plan's binding destination broker-2:8080"),
        "{text}"
    );
    let json = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--strategy",
        "BandShedder",
        "--cycles",
        "2",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let prediction = v["prediction"].as_array().unwrap();
    assert_eq!(prediction.len(), 4);
    assert_eq!(prediction[0]["broker"], "broker-1:8080");
    assert!(prediction[0]["scoreAfter"].as_f64().unwrap() < 85.0);
    // One cycle is not enough: the hit count waits for a second look.
    let one = explain(&[
        "--snapshot",
        "examples/snapshot.json",
        "--strategy",
        "BandShedder",
    ]);
    let text = String::from_utf8_lossy(&one.stdout);
    assert!(text.contains("Unloads (0)"), "{text}");
    assert!(text.contains("1/2 cycles"), "{text}");
}
