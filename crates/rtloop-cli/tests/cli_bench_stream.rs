//! `rtloop bench stream` end to end on its quick profile: every throughput row has the bare
//! ring measured beside the stream in the same run, a verdict that follows its goal, no
//! errors, and nothing left behind in the stream directory.

use std::process::Command;

use rtloop_testkit::TempDir;

#[test]
fn every_throughput_row_has_its_same_run_bare_ring_and_an_honest_verdict() {
    let shm = TempDir::new("bench-stream-shm");
    let o = Command::new(env!("CARGO_BIN_EXE_rtloop"))
        .args(["--json", "bench", "stream", "--quick", "--repeats", "1"])
        .env("RTLOOP_SHM_DIR", shm.path())
        .output()
        .expect("rtloop runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let rows = v["throughput"].as_array().expect("throughput rows");
    let shapes: Vec<(u64, u64, bool)> = rows
        .iter()
        .map(|r| {
            (
                r["payload_bytes"].as_u64().unwrap(),
                r["capacity"].as_u64().unwrap(),
                r["copy_out"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            (8192, 24989, false),
            (8192, 131, false),
            (1024, 1024, false),
            (64, 4096, false),
            (8192, 24989, true),
        ]
    );
    for r in rows {
        let (gb, bare) = (
            r["gb_per_s"].as_f64().unwrap(),
            r["bare_gb_per_s"].as_f64().unwrap(),
        );
        assert!(gb > 0.0 && bare > 0.0, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
        let ratio = r["ratio_to_bare"].as_f64().unwrap();
        assert!((ratio - gb / bare).abs() < 1e-9, "{r}");
        let want = match r["goal"].as_f64() {
            Some(goal) if ratio >= goal => "met",
            Some(_) => "not met",
            None => "-",
        };
        assert_eq!(r["verdict"], want, "{r}");
        // the copy-out row is also held against memcpy of the same working set
        assert_eq!(
            r["memcpy_gb_per_s"].is_number(),
            r["copy_out"].as_bool().unwrap(),
            "{r}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(shm.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
