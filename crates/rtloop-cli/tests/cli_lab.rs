//! `rtloop lab` as a user runs it: a short loadtest with the device in its own process, the
//! tuner on a short sweep, and every bad setting refused before anything starts.

mod common;
use common::rtloop;

#[test]
fn loadtest_runs_end_to_end() {
    let out = std::env::temp_dir().join(format!("cli-lab-{}", std::process::id()));
    let o = common::rtloop_cmd()
        .args([
            "--json",
            "lab",
            "loadtest",
            "--profile",
            "intan64",
            "--read-size",
            "885",
            "--seconds",
            "1",
            "--warmup",
            "0.3",
            "--every",
            "10",
            "--work",
            "bandpass",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["read_size"], 888, "rounded up to a multiple of 4");
    assert_eq!(v["device"]["ended"], "stopped");
    let h = &v["host"];
    assert!(h["latency"]["count"].as_u64().unwrap() > 100, "{h}");
    assert_eq!(h["histogram_us"].as_array().unwrap().len(), 1000);
    assert!(h["work"]["count"].as_u64().unwrap() > 0);
    assert!(v["reference_pingpong"]["p50_ns"].as_u64().unwrap() > 0);
    // the reference for the tails samples as the run did: one round trip per loopback
    assert_eq!(
        v["reference_paced"]["count"], h["latency"]["count"],
        "{}",
        v["reference_paced"]
    );
    // the verdict lab tune gives a step, with its reason
    let verdict = v["verdict"].as_str().unwrap();
    assert!(
        ["stable at 0 %", "stable near 0 %", "unstable", "error"].contains(&verdict),
        "{verdict}"
    );
    assert!(!v["verdict_notes"].as_str().unwrap().is_empty());
    // the FIFO's high water over the measured window is part of the whole run's
    let d = &v["device"];
    assert!(
        d["fifo_high_water_run"].as_u64().unwrap() >= d["fifo_high_water"].as_u64().unwrap(),
        "{d}"
    );
    for f in ["results.json", "latency.png", "percent_used.png"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn tune_sweeps_down_to_the_minimum_and_recommends() {
    let o = rtloop(&[
        "--json",
        "lab",
        "tune",
        "--profile",
        "intan64",
        "--quick",
        "--start",
        "1024",
        "--every",
        "10",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sizes: Vec<u64> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["read_size"].as_u64().unwrap())
        .collect();
    // the sweep halves from the start until a size is unstable or the minimum is passed;
    // which sizes hold depends on how busy this shared machine is, the order does not
    assert_eq!(sizes[0], 1024, "{sizes:?}");
    assert_eq!(v["min_read_size"], 160);
    let classes: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["class"].as_str().unwrap())
        .collect();
    for class in &classes {
        assert!(
            ["stable at 0 %", "stable near 0 %", "unstable", "error"].contains(class),
            "{class}"
        );
    }
    for (k, pair) in sizes.windows(2).enumerate() {
        assert!(
            pair[1] == pair[0] / 2 || pair[1] == 160 || classes[k + 1] == "error",
            "{sizes:?}"
        );
        assert_ne!(
            classes[k], "unstable",
            "the sweep goes on after an unstable size: {classes:?}"
        );
    }
    match classes.iter().position(|c| *c == "unstable") {
        // stopped at the first unstable size
        Some(k) => assert_eq!(k, classes.len() - 1, "{classes:?}"),
        // reached the minimum, then showed that the next size down is refused
        None => {
            assert_eq!(sizes[sizes.len() - 2..], [160, 80], "{sizes:?}");
            assert_eq!(*classes.last().unwrap(), "error");
            assert!(v["recommended_read_size"].as_u64().is_some(), "{v}");
        }
    }
}

#[test]
fn bad_settings_are_refused_before_anything_starts() {
    for (args, want) in [
        (
            vec!["--fps", "0"],
            "FramesPerSecond 0 is out of range: allowed 1..=27777777",
        ),
        (vec!["--fps", "30000000"], "allowed 1..=27777777"),
        (
            vec!["--fps", "1000000", "--received-words", "300"],
            "more than the 241",
        ),
        (vec!["--read-size", "512"], "requires at least 816 bytes"),
        (vec!["--read-size", "lots"], "is not a number of bytes"),
        (
            vec!["--fifo-bytes", "0"],
            "FIFO capacity must be at least 1 byte",
        ),
        (vec!["--profile", "np9"], "allowed: 2xnp2, intan64"),
        (
            vec!["--transport", "pigeon"],
            "allowed: stream, unix, tcp, fieldtrip",
        ),
        (vec!["--every", "0"], "at least 1"),
        (vec!["--monitor-hz", "5000"], "1..=1000"),
    ] {
        let mut a = vec!["lab", "loadtest", "--seconds", "1", "--no-reference"];
        a.extend(args.iter());
        let o = rtloop(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        // refused before anything started: no device, no measurement
        assert!(o.stdout.is_empty(), "{args:?} printed results");
    }
}
