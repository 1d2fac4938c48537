//! `rtloop verify` through the real binary: generator and receiver processes, every packet
//! checked; bad options refused with the allowed range.

mod common;
use common::{rtloop, text};

#[test]
fn verify_delivers_every_packet_intact_in_lossless_mode() {
    let o = rtloop(&["--json", "verify", "--packets", "100000"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], 100_000);
    assert_eq!(v["errors"], 0);
    assert_eq!(v["lost"], 0);
    assert_eq!(v["capacity"], 24989);
    assert!(v["gb_per_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn verify_runs_several_pairs_at_once() {
    let o = rtloop(&[
        "--json",
        "verify",
        "--packets",
        "20000",
        "--pairs",
        "2",
        "--packet-bytes",
        "1024",
        "--capacity",
        "997",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
    assert_eq!(v["ok"], 40_000);
    assert_eq!(v["errors"], 0);
}

#[test]
fn latest_mode_counts_losses_but_never_accepts_torn_packets() {
    // a tiny ring the generator laps constantly: losses expected, corruption never
    let o = rtloop(&[
        "--json",
        "verify",
        "--packets",
        "200000",
        "--mode",
        "latest",
        "--capacity",
        "7",
        "--packet-bytes",
        "512",
        "--batch",
        "3",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["errors"], 0);
    assert_eq!(v["missing"], 0);
    assert_eq!(
        v["ok"].as_u64().unwrap() + v["lost"].as_u64().unwrap(),
        200_000
    );
}

#[test]
fn bad_options_are_refused_with_the_allowed_values() {
    let cases: &[(&[&str], &str)] = &[
        (&["verify", "--packets", "0"], "--packets"),
        (&["verify", "--capacity", "0"], "--capacity"),
        (&["verify", "--packet-bytes", "0"], "multiple of 8"),
        (&["verify", "--packet-bytes", "100"], "multiple of 8"),
        (&["verify", "--mode", "fast"], "lossless"),
        (&["verify", "--pairs", "0"], "--pairs"),
        (&["verify", "--packets", "ten"], "--packets"),
    ];
    for (args, words) in cases {
        let o = rtloop(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(
            text(&o).contains(words),
            "{args:?}: expected {words:?} in {}",
            text(&o)
        );
    }
}

#[test]
fn bench_stream_quick_reports_each_figure_with_its_reference_and_ratio() {
    // every throughput row has the bare ring measured beside the stream in the same run, a
    // verdict that follows its goal, no errors, and nothing is left in the stream directory
    let shm = rtloop_testkit::TempDir::new("bench-stream-shm");
    let out = rtloop_testkit::TempDir::new("bench-stream-out");
    let dir = out.path();
    let o = common::rtloop_cmd()
        .args([
            "--json",
            "bench",
            "stream",
            "--quick",
            "--repeats",
            "1",
            "--out",
        ])
        .arg(dir)
        .env("RTLOOP_SHM_DIR", shm.path())
        .output()
        .expect("rtloop runs");
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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
        // the goal is judged against the reference it names: small messages against the
        // bare ring that stamps each commit, the others against the bare ring
        let judged = if r["goal_against"] == "stamped" {
            r["ratio_to_stamped"].as_f64().unwrap()
        } else {
            ratio
        };
        let want = match r["goal"].as_f64() {
            Some(goal) if judged >= goal => "met",
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
        // every row is also held against the bare ring stamping every packet and the bare
        // ring keeping all of the stream's records
        for (reference, ratio) in [
            ("stamped_gb_per_s", "ratio_to_stamped"),
            ("records_gb_per_s", "ratio_to_records"),
        ] {
            let g = r[reference].as_f64().unwrap();
            assert!(g > 0.0, "{r}");
            let x = r[ratio].as_f64().unwrap();
            assert!((x - gb / g).abs() < 1e-9, "{r}");
        }
    }
    let left: Vec<_> = std::fs::read_dir(shm.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let lat = v["latency"].as_array().unwrap();
    assert!(
        lat.len() >= 4,
        "two references, spin, blocking (and the iceoryx2 peer when built with it)"
    );
    for l in lat {
        assert!(l["summary"]["count"].as_u64().unwrap() > 0);
        assert!(l["reference_p50_ns"].as_u64().unwrap() > 0);
        assert!(l["ratio_p50_to_reference"].as_f64().unwrap() > 0.0);
        assert!(l["reference_p99_ns"].as_u64().unwrap() > 0);
        assert!(l["ratio_p99_to_reference"].as_f64().unwrap() > 0.0);
        // each row against the same hand-off without a ring: a spinning row against the
        // cache-line ping-pong, a sleeping one against two processes waking each other
        let reference = l["reference"].as_str().unwrap();
        match l["name"].as_str().unwrap() {
            "stream, blocking" | "futex ping-pong (reference)" => {
                assert_eq!(reference, "futex ping-pong", "{l}");
            }
            _ => assert_eq!(reference, "cache-line ping-pong", "{l}"),
        }
        // the spin and blocking rows carry their goals; a verdict says "met" only at the goal
        let verdict = l["verdict"].as_str().unwrap();
        match l["name"].as_str().unwrap() {
            "stream, spin" => assert_eq!(
                verdict == "met",
                l["ratio_p50_to_reference"].as_f64().unwrap() <= 1.5,
                "{l}"
            ),
            "stream, blocking" => assert_eq!(
                verdict == "met",
                l["summary"]["p99_ns"].as_u64().unwrap() <= 30_000,
                "{l}"
            ),
            _ => assert_eq!(verdict, "-", "{l}"),
        }
    }
    // the spin-then-sleep sweep: one row per spin budget, every sample measured, the share of
    // gaps (uniform 0-100 us) a spin of S catches, and the reader's CPU as a share of a core
    let sweep = v["wake_sweep"].as_array().unwrap();
    let spins: Vec<u64> = sweep
        .iter()
        .map(|w| w["spin_us"].as_u64().unwrap())
        .collect();
    assert_eq!(spins, [0, 10, 20, 50, 100]);
    for w in sweep {
        assert_eq!(w["summary"]["count"].as_u64().unwrap(), 300, "{w}");
        let caught = w["caught_spinning_percent"].as_f64().unwrap();
        assert!(
            (caught - w["spin_us"].as_f64().unwrap()).abs() < 1e-9,
            "{w}"
        );
        let cpu = w["reader_cpu_percent"].as_f64().unwrap();
        assert!(cpu > 0.0 && cpu <= 110.0, "{w}");
    }
    for f in [
        "results.json",
        "throughput.png",
        "latency-spin.png",
        "latency-blocking.png",
        "latency-reference.png",
        "latency-futex-reference.png",
    ] {
        assert!(dir.join(f).exists(), "{f} written");
    }
}
