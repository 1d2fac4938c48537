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
    // loopbacks came back (how many in 1 s depends on how busy the machine is)
    assert!(h["latency"]["count"].as_u64().unwrap() > 0, "{h}");
    assert_eq!(h["histogram_us"].as_array().unwrap().len(), 1000);
    assert!(h["work"]["count"].as_u64().unwrap() > 0);
    assert!(v["reference_pingpong"]["p50_ns"].as_u64().unwrap() > 0);
    // the reference for the tails samples as the run did: one round trip per loopback
    assert_eq!(
        v["reference_paced"]["count"], h["latency"]["count"],
        "{}",
        v["reference_paced"]
    );
    // the verdict lab tune gives a step, with its reason; it follows the rate the device
    // made (a modest load on a quiet machine: stable; a machine too busy to give the device
    // its CPU: overloaded, with the numbers)
    let verdict = v["verdict"].as_str().unwrap();
    assert!(
        ["stable at 0 %", "stable near 0 %", "unstable", "error"].contains(&verdict)
            || verdict == "overloaded",
        "{verdict}"
    );
    assert!(!v["verdict_notes"].as_str().unwrap().is_empty());
    verdict_follows_the_rate(&v);
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

/// The verdict of a load test report `v` is "overloaded", with the device's numbers, exactly
/// when the device made less than 98 % of its rate over the measured window.
fn verdict_follows_the_rate(v: &serde_json::Value) {
    let d = &v["device"];
    let made = d["fps_measured"].as_f64().unwrap();
    let configured = d["fps_configured"].as_f64().unwrap();
    assert!(d["seconds_measured"].as_f64().unwrap() > 0.0, "{d}");
    let notes = v["verdict_notes"].as_str().unwrap();
    if made < 0.98 * configured {
        assert_eq!(
            v["verdict"], "overloaded",
            "{made} of {configured}: {notes}"
        );
        let numbers = format!("the device made {made:.0} of {configured:.0} frames/s");
        assert!(notes.starts_with(&numbers), "{notes}");
    } else {
        assert_ne!(
            v["verdict"], "overloaded",
            "{made} of {configured}: {notes}"
        );
    }
}

/// A device stopped (SIGSTOP) from inside the measured window until after the run's end
/// made a fraction of its frames: the run is overloaded, says the numbers, and is never
/// called stable however empty its FIFO was (before: "stable at 0 %").
#[test]
fn a_device_stopped_through_the_end_of_the_window_makes_the_run_overloaded() {
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
            "--no-publish",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let device = child_playing(child.id(), "lab-device");
    let mut stopped_for = std::time::Duration::ZERO;
    if let Some(pid) = device {
        // into the measured window, then stopped past the run's end (2.5 s): the host waits
        // for its block meanwhile and ends once the device runs again
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let t = std::time::Instant::now();
        stop_for(pid, std::time::Duration::from_secs(3));
        stopped_for = t.elapsed();
    }
    let o = child.wait_with_output().unwrap();
    assert!(device.is_some(), "no device process: {}", common::text(&o));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = &v["device"];
    assert_eq!(d["ended"], "stopped", "{d}");
    // the window held the stop: the device made at most the frames of the rest of it (and
    // twice its rate while catching up after it)
    let window = d["seconds_measured"].as_f64().unwrap();
    assert!(window > 0.0, "{d}");
    let configured = d["fps_configured"].as_f64().unwrap();
    let made = d["fps_measured"].as_f64().unwrap();
    assert!(
        made < 0.98 * configured,
        "stopped {stopped_for:?} of a {window:.2} s window, made {made} of {configured} frames/s"
    );
    assert_eq!(v["verdict"], "overloaded", "{}", v["verdict_notes"]);
    verdict_follows_the_rate(&v);
}

/// `pid` stopped (SIGSTOP) for `how_long`, then continued.
fn stop_for(pid: u32, how_long: std::time::Duration) {
    use rustix::process::{kill_process, Pid, Signal};
    let pid = Pid::from_raw(pid as i32).expect("a pid above 0");
    if kill_process(pid, Signal::STOP).is_ok() {
        std::thread::sleep(how_long);
        let _ = kill_process(pid, Signal::CONT);
    }
}

/// The tuner recommends only from steps whose device kept its rate: with every step's device
/// stopped through the end of its window, every step is overloaded, the sweep still goes down
/// to the minimum (an overloaded step says nothing about its ReadSize), and it recommends
/// nothing, saying why (before: every step "stable at 0 %" and a recommendation).
#[test]
fn tune_recommends_nothing_from_steps_whose_device_was_stopped() {
    let _turn = one_at_a_time();
    use std::process::Stdio;
    let mut child = common::rtloop_cmd()
        .args([
            "--json",
            "lab",
            "tune",
            "--profile",
            "intan64",
            "--quick",
            "--start",
            "512",
            "--margin",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // stop each step's device from 1 s into it (its measured window starts at 0.5 s) for 4 s,
    // past the step's 3.5 s
    let tune_pid = child.id();
    let mut stopped = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() && std::time::Instant::now() < until {
        let Some(pid) = child_playing(tune_pid, "lab-device") else {
            continue;
        };
        if stopped.contains(&pid) {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        stopped.push(pid);
        std::thread::sleep(std::time::Duration::from_millis(1000));
        stop_for(pid, std::time::Duration::from_secs(4));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    let measured: Vec<&serde_json::Value> = steps
        .iter()
        .filter(|s| !s["fps_achieved"].is_null())
        .collect();
    // 512, 256 and the minimum, 160; each device was stopped
    assert_eq!(measured.len(), 3, "{v}");
    assert_eq!(stopped.len(), 3, "{stopped:?}: {v}");
    for s in &measured {
        let made = s["fps_achieved"].as_f64().unwrap();
        assert!(made < 0.98 * s["fps"].as_f64().unwrap(), "{s}");
        assert_eq!(s["class"], "overloaded", "{s}");
        assert_eq!(s["qualifies"], false, "{s}");
    }
    assert!(v["recommended_read_size"].is_null(), "{v}");
    let why = v["no_recommendation"].as_str().unwrap();
    assert!(why.contains("3 step(s) overloaded"), "{why}");
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
            [
                "stable at 0 %",
                "stable near 0 %",
                "unstable",
                "overloaded",
                "error"
            ]
            .contains(class),
            "{class}"
        );
    }
    // every measured step shows the rate its device made, and is overloaded exactly when
    // that fell more than 2 % short of the rate configured
    for s in v["steps"].as_array().unwrap() {
        if let Some(made) = s["fps_achieved"].as_f64() {
            let short = made < 0.98 * s["fps"].as_f64().unwrap();
            assert_eq!(s["class"] == "overloaded", short, "{s}");
        }
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
        }
    }
    // a recommendation comes only from a step that qualifies (stable, its rate kept, its p99
    // within the stated bound of the reference measured after it); with none, it says why
    let qualifying: Vec<u64> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["qualifies"] == true)
        .map(|s| s["read_size"].as_u64().unwrap())
        .collect();
    for s in v["steps"].as_array().unwrap() {
        if s["qualifies"] == true {
            let bound = s["tail_bound_ns"].as_u64().unwrap();
            assert!(s["latency"]["p99_ns"].as_u64().unwrap() <= bound, "{s}");
            assert!(s["class"].as_str().unwrap().starts_with("stable"), "{s}");
        }
    }
    match v["recommended_read_size"].as_u64() {
        Some(r) => assert!(qualifying.contains(&r), "{r} not in {qualifying:?}"),
        None => {
            assert!(qualifying.is_empty(), "{qualifying:?}: {v}");
            assert!(v["no_recommendation"].as_str().is_some(), "{v}");
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
    // intan64: 30 kHz, a frame every 33,332 ns, so the stop missed 1,500 frames. They are
    // made up at twice the rate: one step makes at most its catch-up window over half a
    // period, plus one; the window is 50 µs (4 frames) unless the device's own last two
    // steps were both longer (a loaded machine, a debug build), never the stop itself. How
    // many that is on a quiet machine is bench/lab_stalls.py's figure, not this test's
    let period_ns = 1e9 / d["fps_configured"].as_f64().unwrap();
    let window = d["burst_window_ns"].as_u64().unwrap();
    let most = d["burst_max_frames"].as_u64().unwrap();
    assert!(window >= 50_000, "{d}");
    assert!(
        most as f64 <= window as f64 / (period_ns / 2.0) + 1.0,
        "{most} frames in one step, more than twice the rate over its {window} ns window: {d}"
    );
    // it made up the stop, or says it did not keep its rate
    verdict_follows_the_rate(&v);
}
