//! `rtloop bench runtime --quick --no-python` end to end: every row has its same-run
//! reference, and the closed-loop row (LiCoRICE's headline: input to output, measured from
//! outside the model) answers every datagram and says "met" only at its target.

use std::process::Command;

use rtloop_testkit::TempDir;

#[test]
fn bench_runtime_measures_the_closed_loop_from_outside_beside_a_bare_round_trip() {
    let shm = TempDir::new("bench-runtime-shm");
    let o = Command::new(env!("CARGO_BIN_EXE_rtloop"))
        .args(["--json", "bench", "runtime", "--quick", "--no-python"])
        .env("RTLOOP_SHM_DIR", shm.path())
        .output()
        .expect("rtloop runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    let model = &v["closed_loop"];
    let bare = &v["closed_loop_bare"];
    assert!(model["count"].as_u64().unwrap() > 100, "{model}");
    assert!(bare["count"].as_u64().unwrap() > 100, "{bare}");
    let row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["part"] == "closed loop, from outside")
        .expect("a closed-loop row");
    assert_eq!(row["target"], "p99 <= 1 tick");
    let p99 = model["p99_ns"].as_u64().unwrap();
    assert_eq!(row["met"], p99 <= 1_000_000, "{row}");
    assert!(row["reference"]
        .as_str()
        .unwrap()
        .starts_with("bare UDP round trip"));
    // every row with a target has a verdict, every row a reference
    for r in v["rows"].as_array().unwrap() {
        assert!(!r["reference"].as_str().unwrap().is_empty(), "{r}");
    }
}
