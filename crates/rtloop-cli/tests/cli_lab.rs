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

/// The reference for the lab's tails samples as a load test does: the side on the device's
/// CPU makes its stamps on schedule whatever the host's side does, so a stall of the host's
/// CPU delays every stamp made during it, as it delays every loopback due in it. A ping-pong
/// that waits for each round trip before the next would count the stall once.
#[test]
fn the_paced_reference_counts_a_host_stall_for_every_stamp_made_during_it() {
    // the reference's device side is a child process of the rtloop executable
    std::env::set_var("RTLOOP_EXE", env!("CARGO_BIN_EXE_rtloop"));
    // 200 stamps 1 ms apart; the host side stops for 60 ms once it has echoed the 1000
    // warm-up stamps and 50 measured ones
    let stall = std::time::Duration::from_millis(60);
    let h = rtloop_lab::reference::bare_loop_paced_with_host_stall(
        200,
        std::time::Duration::from_millis(200),
        1050,
        stall,
    )
    .unwrap();
    assert_eq!(h.len(), 200, "every measured stamp came back");
    // about 60 stamps were made during the stall, each late by what was left of it; on a
    // loaded machine the device's side may itself be held up, so ask for far fewer
    let late: u64 = h
        .recorded()
        .iter()
        .filter(|&&(ns, _)| ns >= 10_000_000)
        .map(|&(_, n)| n)
        .sum();
    assert!(
        late >= 5,
        "{late} stamps late by 10 ms or more: {:?}",
        h.summary()
    );
    let mine = format!("rtloop-lines-loop-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(rtloop_sys::shm_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .collect();
    assert!(left.is_empty(), "the shared lines are removed: {left:?}");
}
