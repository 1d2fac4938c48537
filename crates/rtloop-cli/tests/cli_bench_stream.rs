//! `rtloop bench stream --quick` as the command line builds it (with the iceoryx2 peer): every
//! row and its peer column are measured. A failed peer run only warns and leaves its figures
//! out of the report, so this test is what notices an iceoryx2 column that stopped working
//! (the wheel's executable leaves iceoryx2 out, so the Python tests cannot).

mod common;
use common::{rtloop, text};

#[test]
fn the_quick_stream_benchmark_measures_the_iceoryx2_peer_beside_every_row() {
    let o = rtloop(&["--json", "bench", "stream", "--quick"]);
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = r["throughput"].as_array().unwrap();
    assert!(rows.len() >= 4, "{rows:?}");
    for row in rows {
        let peer = &row["iceoryx2_msgs_per_s"];
        if row["copy_out"].as_bool().unwrap() {
            // the copy-out row has no peer column: iceoryx2 readers read in place
            assert!(peer.is_null(), "{row}");
        } else {
            assert!(peer.as_f64().is_some_and(|v| v > 0.0), "{row}");
            assert!(row["iceoryx2_gb_per_s"].as_f64().unwrap() > 0.0, "{row}");
        }
    }
    let peer = r["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "iceoryx2, spin (peer)")
        .expect("an iceoryx2 latency row");
    assert!(peer["summary"]["count"].as_u64().unwrap() > 0, "{peer}");
}
