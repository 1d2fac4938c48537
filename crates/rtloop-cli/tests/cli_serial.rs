//! `rtloop run` with the `serial_out` sink end to end: a synthetic source, a Rust module
//! that raises a trigger every 5th tick and two `serial_out` sinks, each writing to the
//! follower side of a real pseudo-terminal pair; the test reads the leader sides. No timing
//! thresholds: the bytes, counts and messages only (events are timed by tick deadline, so
//! `min_interval_ms` drops the same events on a busy machine).

mod common;
use std::path::Path;

use rtloop_testkit::pty::Pty;

fn proc<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no process {name} in {v}"))
}

fn model(d: &Path, name: &str, sinks: &str) -> std::path::PathBuf {
    std::fs::write(
        d.join("every5.rs"),
        "pub fn step(t: &mut Tick) {\n    t.output::<u8>(0)[0] = u8::from(t.tick() % 5 == 0);\n}\n",
    )
    .unwrap();
    let p = d.join("m.yaml");
    std::fs::write(
        &p,
        format!(
            "config: {{name: {name}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [1], dtype: float64}}\n  trig: {{shape: [1], dtype: uint8}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             modules:\n  every5: {{language: rust, code: every5.rs, in: [raw], out: [trig]}}\n\
             sinks:\n{sinks}"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_model_sends_one_byte_per_event_to_a_serial_port_and_reports_the_latency() {
    let d = rtloop_testkit::TempDir::new("cli-serial");
    let (a, b) = (Pty::open(), Pty::open());
    let name = format!("ser{}", std::process::id());
    let m = model(
        d.path(),
        &name,
        &format!(
            "  stim: {{driver: serial_out, in: [trig], options: {{port: {}, byte: 65}}}}\n  \
             paced: {{driver: serial_out, in: [trig], options: {{port: {}, message: \"P\\n\", \
             min_interval_ms: 7, baud: 9600}}}}\n",
            a.path, b.path
        ),
    );
    let o = common::rtloop_cmd()
        .current_dir(d.path())
        .args([
            "--json",
            "run",
            m.to_str().unwrap(),
            "--quiet",
            "--ticks",
            "500",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // ticks 0, 5, ..., 495: 100 events, one byte each
    assert_eq!(proc(&v, "stim")["ticks"], 500);
    assert_eq!(proc(&v, "stim")["input_overruns"], 0);
    assert_eq!(a.take(), vec![b'A'; 100]);
    // 7 ms apart at least: ticks 0, 10, 20, ...: every other event
    assert_eq!(b.take(), b"P\n".repeat(50));

    let stim = proc(&v, "stim")["summary"].as_str().unwrap();
    assert!(
        stim.starts_with(&format!(
            "sent 100 events to {} at 115200 baud (1 bytes each); dropped 0 within \
             min_interval_ms, 0 on a full port; tick start to write returned p50 ",
            a.path
        )),
        "{stim}"
    );
    assert!(
        stim.contains(" µs, p99 ") && stim.ends_with(" µs"),
        "{stim}"
    );
    let paced = proc(&v, "paced")["summary"].as_str().unwrap();
    assert!(
        paced.starts_with(&format!(
            "sent 50 events to {} at 9600 baud (2 bytes each); dropped 50 within \
             min_interval_ms, 0 on a full port; tick start to write returned p50 ",
            b.path
        )),
        "{paced}"
    );
    // the report written to the run's output directory carries the same lines
    let written: serde_json::Value = serde_json::from_slice(
        &std::fs::read(d.path().join("out").join(&name).join("report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(proc(&written, "stim")["summary"], stim);
    assert_eq!(proc(&written, "paced")["summary"], paced);
}

#[test]
fn a_serial_port_that_does_not_exist_stops_the_model_before_it_starts() {
    let d = rtloop_testkit::TempDir::new("cli-serial-bad");
    let name = format!("serbad{}", std::process::id());
    let m = model(
        d.path(),
        &name,
        "  stim: {driver: serial_out, in: [trig], options: {port: /dev/ttyACM-none, byte: 1}}\n",
    );
    let o = common::rtloop_cmd()
        .current_dir(d.path())
        .args(["run", m.to_str().unwrap(), "--quiet", "--ticks", "10"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let t = common::text(&o);
    assert!(
        t.contains("port: /dev/ttyACM-none does not exist")
            && t.contains("stim")
            && (t.contains("serial ports here:") || t.contains("no /dev/ttyACM*")),
        "{t}"
    );
}
