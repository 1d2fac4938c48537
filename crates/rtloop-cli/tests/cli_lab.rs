//! `rtloop lab` as a user runs it: a short loadtest with the device in its own process, the
//! tuner on a short sweep, and every bad setting refused before anything starts.

mod common;
use common::rtloop;

/// The tests that run a device spin it on a CPU of its own: on two CPUs they take turns, or
/// each device would get half a CPU and fall behind its schedule.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn loadtest_runs_end_to_end() {
    let _turn = one_at_a_time();
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
    let _turn = one_at_a_time();
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
    let _turn = one_at_a_time();
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
    let mine = format!(".rtloop-lines-loop-{}-", std::process::id());
    let left: Vec<_> = std::fs::read_dir(rtloop_sys::shm_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&mine))
        .collect();
    assert!(left.is_empty(), "the shared lines are removed: {left:?}");
}

/// The pid of the child of `parent` whose command line plays `role`, waiting up to 20 s.
fn child_playing(parent: u32, role: &str) -> Option<u32> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < until {
        for e in std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()) {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...: the fields after the last ')'
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            if ppid == Some(parent)
                && args.get(1) == Some(&&b"child"[..])
                && args.get(2) == Some(&role.as_bytes())
            {
                return Some(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

/// The emulated device is a process, and the OS or the hypervisor may stop it for
/// milliseconds. It must not hand the host the frames it missed as one burst (real hardware
/// never sends one, and the loopbacks at its end would charge the emulator's stall to the
/// host): it makes them up at twice its rate. Stopping the device process for 50 ms made
/// all the 1,500 frames it missed (3,000 at 2xnp2's rate) in one step before; now one step
/// makes at most the few frames the slack allows, and every frame is still made.
#[test]
fn a_stopped_device_makes_up_its_frames_at_twice_the_rate_not_in_one_burst() {
    let _turn = one_at_a_time();
    use std::process::Stdio;
    let child = common::rtloop_cmd()
        .args([
            "--json",
            "lab",
            "loadtest",
            "--profile",
            "intan64",
            "--read-size",
            "1024",
            "--seconds",
            "2",
            "--warmup",
            "0.5",
            "--no-reference",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let device = child_playing(child.id(), "lab-device");
    if let Some(pid) = device {
        // into the measured window, then stop the device process for 50 ms
        std::thread::sleep(std::time::Duration::from_millis(1200));
        use rustix::process::{kill_process, Pid, Signal};
        let pid = Pid::from_raw(pid as i32).expect("a pid above 0");
        kill_process(pid, Signal::STOP).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        kill_process(pid, Signal::CONT).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(device.is_some(), "no device process: {}", common::text(&o));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["device"];
    assert_eq!(d["ended"], "stopped", "{d}");
    // the stop was seen: the first frame after it was made that late
    assert!(
        d["lateness"]["max_ns"].as_u64().unwrap() >= 40_000_000,
        "{d}"
    );
    // intan64, light enough for a debug build's host to keep up: 30 kHz, a frame every
    // 33,332 ns, so the stop missed 1,500 frames. Made up at twice the rate from SLACK_NS
    // back, one step makes 4 of them; slow steps (a debug build) may widen that window to
    // twice their own length, so ask only that no step made a tenth of what the stop missed
    // (the exact bound is the pacer's unit tests')
    let missed = 50_000_000 / 33_332;
    let most = d["burst_max_frames"].as_u64().unwrap();
    assert!(
        most <= missed / 10,
        "{most} frames in one step, of the {missed} the stop missed: {d}"
    );
    // and every frame was made
    let achieved = d["fps_achieved"].as_f64().unwrap();
    let configured = d["fps_configured"].as_f64().unwrap();
    assert!(
        (achieved - configured).abs() / configured < 0.01,
        "{achieved} frames/s against {configured}"
    );
}
