//! `rtloop run` end to end: real processes, real streams, real UDP sockets, real SQLite
//! files, Rust modules compiled with rustc. (Python modules are tested in
//! tests/test_runtime.py.) No timing thresholds: only counts, data and messages.

mod common;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rtloop_stream::{ReaderMode, Stream};

/// Models pin processes and the timer spins its busy-wait tail: one model at a time, so the
/// tests do not starve each other on a 2-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A directory for one test, removed when the test ends (also on failure).
fn dir(tag: &str) -> rtloop_testkit::TempDir {
    rtloop_testkit::TempDir::new(&format!("cli-run-{tag}"))
}

fn write(d: &Path, name: &str, text: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// Run rtloop in the directory of the model named in `args` (each test's own temporary
/// directory), so a run's default output directory, `out/<model name>`, lands there too.
fn run(args: &[&str]) -> Output {
    let mut c = common::rtloop_cmd();
    if let Some(m) = args.iter().find(|a| a.ends_with(".yaml")) {
        c.current_dir(Path::new(m).parent().unwrap());
    }
    c.args(args).output().expect("rtloop runs")
}

fn run_json(model: &Path, extra: &[&str]) -> (serde_json::Value, Output) {
    let mut args = vec!["--json", "run", model.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    let o = run(&args);
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (v, o)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn proc<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no process {name} in {v}"))
}

#[test]
fn synthetic_to_stream_out_runs_every_tick_and_reports_timing() {
    let _g = serial();
    let d = dir("synth");
    let out_stream = format!("cli-run-out-{}", std::process::id());
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: clirun{pid}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [30, 4], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{frequency: 100, amplitude: 2}}}}\n\
             sinks:\n  out: {{driver: stream_out, in: [raw], options: {{stream: {out_stream}, keep: true}}}}\n",
            pid = std::process::id()
        ),
    );
    let (v, o) = run_json(&model, &["--ticks", "300"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(v["ticks"], 300);
    assert_eq!(v["stopped_by"], "limit");
    assert!(v["tick_start"]["count"].as_u64().unwrap() == 300);
    for name in ["gen", "out"] {
        let p = proc(&v, name);
        assert_eq!(p["ticks"], 300, "{p}");
        assert!(p["exec"]["count"].as_u64().unwrap() == 300, "{p}");
        assert!(p["error"].is_null(), "{p}");
    }
    // the data went through: 300 ticks x 30 samples of a 100 Hz sine of amplitude 2
    let s = Stream::open(&out_stream).unwrap();
    assert_eq!(s.written(), 9000);
    let r = s.reader(ReaderMode::Latest).unwrap();
    let w = r.window_as::<f32>(0, 9000).unwrap();
    let max = w.to_vec().unwrap().into_iter().fold(f32::MIN, f32::max);
    assert!((max - 2.0).abs() < 0.01, "{max}");
    drop((w, r, s));
    Stream::remove(&out_stream).unwrap();
    // the model's own streams are removed at the end
    let model_name = format!("clirun{}", std::process::id());
    assert!(
        !Stream::list().iter().any(|n| n.starts_with(&model_name)),
        "{:?}",
        Stream::list()
    );
}

#[test]
fn a_bad_model_is_refused_with_every_problem_and_its_line() {
    let d = dir("bad");
    let model = write(
        &d,
        "bad.yaml",
        "config: {tick_us: 1000}\n\
         signals:\n  raw: {shape: [4], dtype: float32}\n\
         sources:\n  gen: {driver: synthetic, out: [raw]}\n  gen2: {driver: synthetic, out: [raw]}\n\
         modules:\n  m: {language: python, code: missing.py, in: [nope], out: []}\n",
    );
    let o = run(&["run", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("line 6") && e.contains("gen"),
        "two writers: {e}"
    );
    assert!(e.contains("missing.py"), "missing code file: {e}");
    assert!(e.contains("nope"), "unknown signal: {e}");
    // --check says the same without running
    let o = run(&["run", "--check", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_tick_below_what_the_machine_can_schedule_is_refused_with_the_measured_minimum() {
    let _g = serial();
    let d = dir("short");
    let model = write(
        &d,
        "m.yaml",
        "config: {tick_us: 1, busy_wait_us: 0}\nsignals:\n  raw: {shape: [1], dtype: float32}\n\
         sources:\n  gen: {driver: synthetic, out: [raw]}\n",
    );
    let o = run(&["run", model.to_str().unwrap(), "--ticks", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("below what this machine can schedule") && e.contains("measured minimum"),
        "{e}"
    );
}

fn spike_model(d: &Path, port: u16, tag: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/models/spike_detector");
    std::fs::copy(src.join("detect.rs"), d.join("detect.rs")).unwrap();
    let text = std::fs::read_to_string(src.join("model_rust.yaml"))
        .unwrap()
        .replace("127.0.0.1:25002", &format!("127.0.0.1:{port}"))
        .replace(
            "name: spike_detector_rust",
            &format!("name: spk{tag}{}", std::process::id()),
        );
    write(d, "model_rust.yaml", &text)
}

#[test]
fn the_rust_spike_detector_example_sends_triggers_and_logs_every_tick() {
    let _g = serial();
    let d = dir("spikes");
    let port = free_udp_port();
    let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let model = spike_model(&d, port, "a");
    let given = d.join("given");
    let (v, o) = run_json(
        &model,
        &["--ticks", "2000", "--out", given.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(proc(&v, "detect")["ticks"], 2000);
    assert_eq!(proc(&v, "detect")["runs"], "rust detect.rs");
    // 32 channels x 5 spikes/s x 1.8 s after learning: dozens of triggers
    let mut triggers = 0;
    let mut buf = [0u8; 16];
    while let Ok(n) = rx.recv(&mut buf) {
        assert_eq!(&buf[..n], &[1u8], "a trigger is one byte, 1");
        triggers += 1;
    }
    assert!(triggers > 10, "{triggers} triggers");
    let log = proc(&v, "log")["summary"].as_str().unwrap().to_string();
    assert!(log.contains("logged 2000 ticks"), "{log}");
    // the log lands in the output directory (given here), never beside the model file
    assert!(d.join("given").join("spikes_rust.db").exists());
    assert!(!d.join("spikes_rust.db").exists());
    assert!(d.join("given").join("report.json").exists());
}

#[test]
fn a_panicking_rust_module_is_reported_by_name_and_the_model_stops_cleanly() {
    let _g = serial();
    let d = dir("panic");
    write(
        &d,
        "bad.rs",
        "pub fn step(t: &mut Tick) {\n    if t.tick() == 50 { panic!(\"sensor went away\"); }\n    \
         let x = t.input::<f32>(0)[0];\n    t.output::<f32>(0)[0] = x;\n}\n",
    );
    let name = format!("panic{}", std::process::id());
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  raw: {{shape: [1], dtype: float32}}\n  \
             y: {{shape: [1], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             modules:\n  bad: {{language: rust, code: bad.rs, in: [raw], out: [y]}}\n\
             sinks:\n  out: {{driver: stream_out, in: [y], options: {{stream: {name}-o}}}}\n"
        ),
    );
    let (v, o) = run_json(&model, &["--ticks", "5000"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("bad") && e.contains("sensor went away"), "{e}");
    assert_eq!(v["stopped_by"], "failed");
    assert_eq!(proc(&v, "bad")["ticks"], 50);
    assert!(proc(&v, "bad")["error"]
        .as_str()
        .unwrap()
        .contains("sensor went away"));
    assert!(!Stream::list().iter().any(|n| n.starts_with(&name)));
}

#[test]
fn a_rust_module_asking_for_the_wrong_dtype_gets_an_error_naming_both() {
    let _g = serial();
    let d = dir("dtype");
    write(
        &d,
        "m.rs",
        "pub fn step(t: &mut Tick) { t.output::<f64>(0)[0] = 1.0; }\n",
    );
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: dt{}}}\nsignals:\n  y: {{shape: [1], dtype: float32}}\n\
             modules:\n  m: {{language: rust, code: m.rs, out: [y]}}\n",
            std::process::id()
        ),
    );
    let o = run(&["run", model.to_str().unwrap(), "--ticks", "100", "--quiet"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("float32") && e.contains("f64") || e.contains("float64"),
        "{e}"
    );
}

#[test]
fn a_rust_module_that_does_not_compile_is_refused_before_anything_starts() {
    let _g = serial(); // rustc takes both cores for a moment
    let d = dir("nocompile");
    write(
        &d,
        "m.rs",
        "pub fn step(t: &mut Tick) { let x: u8 = \"no\"; }\n",
    );
    let model = write(
        &d,
        "m.yaml",
        "signals:\n  y: {shape: [1], dtype: float32}\nmodules:\n  m: {language: rust, code: m.rs, out: [y]}\n",
    );
    let o = run(&["run", model.to_str().unwrap(), "--ticks", "10"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("m.rs:1"),
        "rustc's diagnostic points into the user's file: {e}"
    );
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_stops_every_process_writes_the_report_and_removes_the_streams() {
    let _g = serial();
    let d = dir("sigint");
    let name = format!("sigint{}", std::process::id());
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  raw: {{shape: [30, 8], dtype: int16}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             sinks:\n  out: {{driver: stream_out, in: [raw], options: {{stream: {name}-o}}}}\n"
        ),
    );
    let child = common::rtloop_cmd()
        .current_dir(&d)
        .args(["--json", "run", model.to_str().unwrap(), "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sig = format!("{name}.raw");
    wait_for("ticks to run", || {
        Stream::open(&sig).is_ok_and(|s| s.written() > 3000)
    });
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).unwrap(),
        rustix::process::Signal::INT,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stopped_by"], "interrupt");
    assert!(v["ticks"].as_u64().unwrap() > 100);
    assert!(!Stream::list().iter().any(|n| n.starts_with(&name)));
}

#[test]
fn a_killed_process_is_named_with_its_signal_and_the_rest_shut_down() {
    let _g = serial();
    let d = dir("kill");
    let name = format!("kill{}", std::process::id());
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  raw: {{shape: [30, 8], dtype: int16}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             sinks:\n  out: {{driver: stream_out, in: [raw], options: {{stream: {name}-o}}}}\n"
        ),
    );
    let child = common::rtloop_cmd()
        .current_dir(&d)
        .args([
            "--json",
            "run",
            model.to_str().unwrap(),
            "--quiet",
            "--seconds",
            "60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the sink writes its own stream: its writer pid is the `out` process
    let out = format!("{name}-o");
    let mut pid = 0;
    wait_for("the sink to write", || {
        Stream::open(&out).is_ok_and(|s| {
            if let rtloop_stream::Liveness::Active { pid: p, .. } = s.stats().writer {
                pid = p;
            }
            s.written() > 1000 && pid != 0
        })
    });
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("\"out\"") && e.contains("killed by signal 9"),
        "{e}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["stopped_by"], "failed");
    assert!(
        proc(&v, "gen")["error"].is_null(),
        "the source stopped cleanly"
    );
    assert!(!Stream::list()
        .iter()
        .any(|n| n.starts_with(&format!("{name}."))));
    let _ = Stream::remove(&out);
}

#[test]
fn stream_in_reads_a_stream_fed_from_outside_the_model() {
    let _g = serial();
    let d = dir("streamin");
    let name = format!("sin{}", std::process::id());
    let src = format!("{name}-src");
    let s = Stream::create(
        &src,
        &rtloop_stream::StreamConfig::new(rtloop_stream::DType::I32, 2, 0.0, 1 << 16),
    )
    .unwrap();
    let mut w = s.writer().unwrap();
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  x: {{shape: [64, 2], dtype: int32, variable: true}}\n\
             sources:\n  inp: {{driver: stream_in, out: [x], options: {{stream: {src}}}}}\n\
             sinks:\n  out: {{driver: stream_out, in: [x], options: {{stream: {name}-o, keep: true}}}}\n"
        ),
    );
    let child = common::rtloop_cmd()
        .current_dir(&d)
        .args([
            "--json",
            "run",
            model.to_str().unwrap(),
            "--quiet",
            "--seconds",
            "3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // the model is ready for our samples once its source reads our stream (a reader starts
    // at the newest sample): its output stream existing says less, the writer of it may
    // still be starting and the source not yet registered
    wait_for("the model to start", || {
        Stream::open(&format!("{name}-o")).is_ok() && !s.stats().readers.is_empty()
    });
    let data: Vec<i32> = (0..2 * 5000).collect();
    for chunk in data.chunks(2 * 100) {
        w.write(chunk).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = Stream::open(&format!("{name}-o")).unwrap();
    assert_eq!(out.written(), 5000, "every sample, in order");
    let r = out.reader(ReaderMode::Latest).unwrap();
    assert_eq!(r.window_as::<i32>(0, 5000).unwrap().to_vec().unwrap(), data);
    drop((r, out, w, s));
    Stream::remove(&format!("{name}-o")).unwrap();
    // our writer's clean close ended the source stream: its name went with it
    assert!(!Stream::list().contains(&src));
}

#[test]
fn stream_in_of_a_stream_that_does_not_exist_or_does_not_fit_is_refused_by_name() {
    let _g = serial();
    let d = dir("streamin-bad");
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: sinbad{}}}\nsignals:\n  x: {{shape: [4], dtype: int32}}\n\
             sources:\n  inp: {{driver: stream_in, out: [x], options: {{stream: no-such-stream}}}}\n",
            std::process::id()
        ),
    );
    let o = run(&["run", model.to_str().unwrap(), "--ticks", "10", "--quiet"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("no-such-stream") && e.contains("inp"), "{e}");
}

#[test]
fn the_recorder_sink_records_exactly_the_models_ticks() {
    let _g = serial();
    let d = dir("recorder");
    let name = format!("rec{}", std::process::id());
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  raw: {{shape: [30, 16], dtype: int16, history: 5}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{waveform: noise, seed: 9}}}}\n\
             sinks:\n  rec: {{driver: recorder, in: [raw], options: {{out: rec}}}}\n  \
             copy: {{driver: stream_out, in: [raw], options: {{stream: {name}-c, keep: true}}}}\n"
        ),
    );
    let (v, o) = run_json(&model, &["--ticks", "700"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = proc(&v, "rec")["summary"].as_str().unwrap().to_string();
    assert!(
        summary.contains("21000 samples") && summary.contains("(0 lost)"),
        "{summary}"
    );
    // the recorder's `out` is relative to the run's output directory, out/<model name>
    let out = d.join("out").join(&name);
    assert_eq!(v["out_dir"], out.to_str().unwrap());
    assert!(
        !d.join("rec").exists(),
        "nothing is written next to the model file"
    );
    let rec = rtloop_record::Recording::open(&out.join("rec").join(format!("{name}.raw"))).unwrap();
    assert_eq!(rec.samples, 700 * 30);
    assert_eq!(rec.header.n_channels, 16);
    // byte-identical to what the model's other sink saw, tick for tick
    let copy = Stream::open(&format!("{name}-c")).unwrap();
    assert_eq!(copy.written(), 21000);
    let r = copy.reader(ReaderMode::Latest).unwrap();
    let expected = r.window(0, 21000).unwrap().to_vec().unwrap();
    let data = std::fs::read(rec.dir.join("data.bin")).unwrap();
    assert_eq!(data, expected);
    drop((r, copy));
    Stream::remove(&format!("{name}-c")).unwrap();
}

#[test]
fn a_recorder_whose_directory_cannot_be_written_is_refused_by_name() {
    let _g = serial();
    let d = dir("recorder-bad");
    let out = d.join("out").join(format!("recbad{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("afile"), b"").unwrap();
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: recbad{}}}\nsignals:\n  raw: {{shape: [4], dtype: int16}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             sinks:\n  rec: {{driver: recorder, in: [raw], options: {{out: afile/sub}}}}\n",
            std::process::id()
        ),
    );
    let o = run(&["run", model.to_str().unwrap(), "--ticks", "10", "--quiet"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("rec") && e.contains("afile/sub"), "{e}");
}

fn late_model(d: &Path, name: &str, on_miss: &str) -> PathBuf {
    write(
        d,
        "late.rs",
        "pub fn step(t: &mut Tick) {\n    if t.tick() == 20 { std::thread::sleep(std::time::Duration::from_millis(5)); }\n    \
         t.output::<f32>(0)[0] = t.input::<f32>(0)[0];\n}\n",
    );
    write(
        d,
        "m.yaml",
        &format!(
            "config: {{name: {name}, on_miss: {on_miss}}}\nsignals:\n  raw: {{shape: [1], dtype: float32}}\n  \
             y: {{shape: [1], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n\
             modules:\n  late: {{language: rust, code: late.rs, in: [raw], out: [y]}}\n"
        ),
    )
}

#[test]
fn a_late_process_is_counted_as_a_miss_and_the_model_goes_on_by_default() {
    let _g = serial();
    let d = dir("miss-continue");
    let model = late_model(&d, &format!("missc{}", std::process::id()), "continue");
    let (v, o) = run_json(&model, &["--ticks", "200"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(v["stopped_by"], "limit");
    let late = proc(&v, "late");
    assert_eq!(late["ticks"], 200, "it caught up and did every tick");
    assert!(late["misses"].as_u64().unwrap() >= 1, "{late}");
}

#[test]
fn on_miss_stop_ends_the_model_at_the_first_miss_naming_the_late_process() {
    let _g = serial();
    let d = dir("miss-stop");
    let model = late_model(&d, &format!("misss{}", std::process::id()), "stop");
    let (v, o) = run_json(&model, &["--ticks", "2000"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(v["stopped_by"], "miss");
    // the first miss stops the model: the planted one at tick 20 at the latest (a loaded
    // machine may make any process miss earlier), and the message names exactly the
    // processes the report counts misses for
    let late: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["misses"].as_u64().unwrap() > 0)
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(!late.is_empty(), "{v}");
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "deadline missed by {} (on_miss: stop)",
            late.join(", ")
        )),
        "{late:?}: {e}"
    );
    assert!(v["ticks"].as_u64().unwrap() <= 21, "{}", v["ticks"]);
}

#[test]
fn keep_leaves_the_signals_streams_with_their_data() {
    let _g = serial();
    let d = dir("keep");
    let name = format!("keep{}", std::process::id());
    // whatever the run keeps goes when the test ends, passed or not
    let _kept = [
        rtloop_testkit::StreamGuard::new(&format!("{name}.raw")),
        rtloop_testkit::StreamGuard::new(&format!("{name}.tick-timing")),
    ];
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}}}\nsignals:\n  raw: {{shape: [10, 3], dtype: int32, history: 2}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{waveform: noise, amplitude: 1000}}}}\n"
        ),
    );
    let (_, o) = run_json(&model, &["--ticks", "50", "--keep"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let s = Stream::open(&format!("{name}.raw")).unwrap();
    // 2 ticks of zero history, then 50 ticks of 10 samples
    assert_eq!(s.written(), 520);
    assert_eq!(s.info().n_channels, 3);
    assert!((s.info().nominal_rate - 10_000.0).abs() < 1e-6);
    drop(s);
    // the tick timing is kept with the signals
    let t = Stream::open(&format!("{name}.tick-timing")).unwrap();
    assert_eq!(t.written(), 50, "one row per tick");
}

#[test]
fn without_realtime_permissions_one_warning_says_what_is_missing_and_the_model_runs() {
    let _g = serial();
    if Command::new("capsh").arg("--help").output().is_err() {
        eprintln!("capsh not installed: skipped");
        return;
    }
    let d = dir("nort");
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: nort{}}}\nsignals:\n  raw: {{shape: [4], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw]}}\n",
            std::process::id()
        ),
    );
    // drop the capabilities SCHED_FIFO and mlockall need, with no rtprio/memlock allowance
    let cmd = format!(
        "ulimit -r 0; ulimit -l 64; exec {} --json run {} --ticks 100 --quiet",
        env!("CARGO_BIN_EXE_rtloop"),
        model.display()
    );
    let o = Command::new("capsh")
        .args(["--drop=cap_sys_nice,cap_ipc_lock", "--", "-c", &cmd])
        .current_dir(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(
        e.matches("warning: realtime set-up not permitted").count(),
        1,
        "{e}"
    );
    assert!(
        e.contains("SCHED_FIFO") && e.contains("mlockall") && e.contains("CAP_SYS_NICE"),
        "{e}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["realtime"]["fifo"], false);
    assert_eq!(v["ticks"], 100);
}

#[test]
fn check_accepts_state_from_init_and_refuses_a_step_without_it() {
    // the documented way to keep state (docs/runtime-model.md): init returns arrays, step
    // takes them after its inputs and outputs
    let d = dir("check-state");
    let model = write(
        &d,
        "lp.yaml",
        "config: {name: lowpass}\nsignals:\n  raw: {shape: [30, 4], dtype: float32}\n  smooth: {shape: [30, 4], dtype: float32}\n\
         sources:\n  gen: {driver: synthetic, out: [raw]}\n\
         modules:\n  lp: {language: python, code: lowpass.py, options: {alpha: 0.1}, in: [raw], out: [smooth]}\n",
    );
    write(
        &d,
        "lowpass.py",
        "import numpy as np\n\ndef init(ctx, alpha=0.1):\n    return np.zeros(4, dtype=np.float32), np.array([alpha], dtype=np.float32)\n\n\
         def step(raw, smooth, y, alpha):\n    smooth[:] = raw\n",
    );
    let o = run(&["run", "--check", model.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // without an init, a step that wants more than its inputs and outputs is refused
    write(
        &d,
        "lowpass.py",
        "def step(raw, smooth, y, alpha):\n    smooth[:] = raw\n",
    );
    let model2 = write(
        &d,
        "lp2.yaml",
        "config: {name: lowpass}\nsignals:\n  raw: {shape: [30, 4], dtype: float32}\n  smooth: {shape: [30, 4], dtype: float32}\n\
         sources:\n  gen: {driver: synthetic, out: [raw]}\n\
         modules:\n  lp: {language: python, code: lowpass.py, in: [raw], out: [smooth]}\n",
    );
    let o = run(&["run", "--check", model2.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("does not take the 2 arguments the model passes"),
        "{}",
        stderr(&o)
    );
}
