//! Built-in blocks in a running model (`rtloop run`: real processes, real streams): what a
//! block writes, tick after tick, is what rtloop-dsp computes over the whole signal offline,
//! and a spike detector's events land in its variable output at the injected spikes. No
//! timing thresholds: only data, counts and messages.

mod common;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;

use rtloop_stream::{ReaderMode, Stream};
use rtloop_testkit::StreamGuard;

/// Models pin processes and the timer spins: one model at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn dir(tag: &str) -> rtloop_testkit::TempDir {
    rtloop_testkit::TempDir::new(&format!("cli-blocks-{tag}"))
}

fn write(d: &Path, name: &str, text: &str) -> PathBuf {
    let p = d.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `rtloop --json run MODEL --quiet --ticks N` in the model's directory.
fn run(model: &Path, ticks: u64) -> (serde_json::Value, Output) {
    let o = common::rtloop_cmd()
        .current_dir(model.parent().unwrap())
        .args([
            "--json",
            "run",
            model.to_str().unwrap(),
            "--quiet",
            "--ticks",
            &ticks.to_string(),
        ])
        .output()
        .expect("rtloop runs");
    let v = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (v, o)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn proc<'a>(v: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no process {name} in {v}"))
}

/// Every value a kept stream holds.
fn values<T: rtloop_stream::Sample>(name: &str) -> Vec<T> {
    let s = Stream::open(name).unwrap();
    let n = s.written();
    let r = s.reader(ReaderMode::Latest).unwrap();
    let v = r.window_as::<T>(0, n).unwrap().to_vec().unwrap();
    drop((r, s));
    v
}

#[test]
fn a_bandpass_block_writes_what_the_filter_computes_offline_across_ticks() {
    let _g = serial();
    let d = dir("bandpass");
    let name = format!("blkbp{}", std::process::id());
    let (raw, filt) = (format!("{name}-raw"), format!("{name}-filt"));
    let _kept = [StreamGuard::new(&raw), StreamGuard::new(&filt)];
    // 30 samples per 1 ms tick: 30 kHz; the input keeps 3 ticks of history, so the block
    // must pick this tick's rows from behind them
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [30, 4], dtype: float32, history: 3}}\n  \
             filt: {{shape: [30, 4], dtype: float32}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{waveform: noise, seed: 7}}}}\n\
             modules:\n  bp:\n    block: bandpass\n    options: {{low: 300, high: 3000, order: 3}}\n    \
             in: [raw]\n    out: [filt]\n\
             sinks:\n  a: {{driver: stream_out, in: [raw], options: {{stream: {raw}, keep: true}}}}\n  \
             b: {{driver: stream_out, in: [filt], options: {{stream: {filt}, keep: true}}}}\n"
        ),
    );
    let (v, o) = run(&model, 400);
    assert!(o.status.success(), "{}", stderr(&o));
    let bp = proc(&v, "bp");
    assert_eq!(bp["runs"], "block bandpass");
    assert_eq!(bp["ticks"], 400);
    assert_eq!(bp["input_overruns"], 0, "{bp}");
    assert!(bp["error"].is_null(), "{bp}");
    // the report states the delay: the band-pass's group delay at the band's centre
    let sections = rtloop_dsp::design(
        rtloop_dsp::Band::Bandpass {
            low: 300.0,
            high: 3000.0,
        },
        3,
        30_000.0,
    )
    .unwrap();
    let gd = rtloop_dsp::group_delay(&sections, (300.0f64 * 3000.0).sqrt(), 30_000.0);
    assert_eq!(bp["delay"]["samples"].as_f64().unwrap(), gd);
    assert!((bp["delay"]["ms"].as_f64().unwrap() - gd / 30.0).abs() < 1e-9);
    assert!(
        bp["summary"]
            .as_str()
            .unwrap()
            .starts_with(&format!("bandpass: delay {gd:.2} samples")),
        "{bp}"
    );
    // the source's other processes have no delay
    assert!(proc(&v, "gen")["delay"].is_null());

    let x = values::<f32>(&raw);
    let y = values::<f32>(&filt);
    assert_eq!((x.len(), y.len()), (400 * 30 * 4, 400 * 30 * 4));
    assert!(x.iter().any(|v| *v != 0.0), "the source wrote noise");
    let mut want = x.clone();
    rtloop_dsp::SosFilter::<f32>::new(&sections, 4)
        .unwrap()
        .process(&mut want)
        .unwrap();
    // the same operations in the same order: equal to the last bit
    let first_diff = y.iter().zip(&want).position(|(a, b)| a != b);
    assert_eq!(
        first_diff,
        None,
        "sample {:?} differs",
        first_diff.map(|i| i / 4)
    );
}

/// A Rust module writing 2 channels of small deterministic noise, with a -5 spike on
/// channel `c` at every sample `n` where `n % 1000 == 500 + 200 c`.
const GENERATOR: &str = "\
pub fn step(t: &mut Tick) {
    let k = t.tick();
    let y = t.output::<f32>(0);
    for r in 0..30 {
        let n = k * 30 + r as u64;
        for c in 0..2 {
            let mut v = 0.1 * ((n as f64) * 1.7 + c as f64).sin();
            if n % 1000 == 500 + 200 * c as u64 {
                v = -5.0;
            }
            y[r * 2 + c] = v as f32;
        }
    }
}
";

#[test]
fn a_spikes_blocks_events_land_in_its_variable_output_at_the_injected_spikes() {
    let _g = serial();
    let d = dir("spikes");
    let name = format!("blksp{}", std::process::id());
    let (raw, ev) = (format!("{name}-raw"), format!("{name}-ev"));
    let _kept = [StreamGuard::new(&raw), StreamGuard::new(&ev)];
    write(&d, "gen.rs", GENERATOR);
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [30, 2], dtype: float32}}\n  \
             ev: {{shape: [8, 3], dtype: float64, variable: true}}\n\
             modules:\n  gen: {{language: rust, code: gen.rs, out: [raw]}}\n  \
             det:\n    block: spikes\n    \
             options: {{k: 5, noise_window: 3000, peak_window: 5, refractory: 30}}\n    \
             in: [raw]\n    out: [ev]\n\
             sinks:\n  a: {{driver: stream_out, in: [raw], options: {{stream: {raw}, keep: true}}}}\n  \
             b: {{driver: stream_out, in: [ev], options: {{stream: {ev}, keep: true}}}}\n"
        ),
    );
    let ticks = 600u64;
    let (v, o) = run(&model, ticks);
    assert!(o.status.success(), "{}", stderr(&o));
    let det = proc(&v, "det");
    assert_eq!(det["runs"], "block spikes");
    assert_eq!(det["input_overruns"], 0, "{det}");
    assert_eq!(det["delay"]["samples"].as_f64().unwrap(), 5.0);

    let events: Vec<[f64; 3]> = values::<f64>(&ev)
        .chunks_exact(3)
        .map(|r| [r[0], r[1], r[2]])
        .collect();
    // the injected spikes after the first noise estimate (3000 samples), each where it was
    // put: its index in the signal's stream, which begins with the signal's one tick of
    // zero history (30 samples)
    let samples = ticks * 30;
    let mut want = Vec::new();
    for n in 3000..samples {
        for c in 0..2u64 {
            if n % 1000 == 500 + 200 * c {
                want.push([c as f64, (n + 30) as f64, -5.0]);
            }
        }
    }
    assert!(want.len() >= 20, "{}", want.len());
    assert_eq!(events, want);
    assert!(
        det["summary"]
            .as_str()
            .unwrap()
            .ends_with(&format!("; {} events", want.len())),
        "{det}"
    );
    // and the same as the detector over the whole recorded signal, offline
    let x = values::<f32>(&raw);
    assert_eq!(x.len() as u64, samples * 2);
    let mut offline = Vec::new();
    rtloop_dsp::SpikeDetector::<f32>::new(rtloop_dsp::SpikeConfig {
        channels: 2,
        k: 5.0,
        sign: rtloop_dsp::Sign::Negative,
        refractory: 30,
        peak_window: 5,
        noise_window: 3000,
    })
    .unwrap()
    .process(&x, |s| {
        offline.push([s.channel as f64, (s.sample + 30) as f64, f64::from(s.peak)]);
    })
    .unwrap();
    assert_eq!(events, offline);
}

#[test]
fn the_blocks_example_detects_spikes_and_reports_each_blocks_delay() {
    let _g = serial();
    let d = dir("example");
    let name = format!("blkex{}", std::process::id());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/models/blocks/model.yaml");
    let text = std::fs::read_to_string(src)
        .unwrap()
        .replace("name: blocks", &format!("name: {name}"))
        .replace("stream: blocks-filtered", &format!("stream: {name}-f"));
    let model = write(&d, "model.yaml", &text);
    let (v, o) = run(&model, 2000);
    assert!(o.status.success(), "{}", stderr(&o));
    for (p, block) in [
        ("reference", "reref"),
        ("band", "bandpass"),
        ("detect", "spikes"),
    ] {
        let p = proc(&v, p);
        assert_eq!(p["runs"], format!("block {block}"));
        assert_eq!(p["ticks"], 2000);
        assert!(p["delay"]["samples"].as_f64().unwrap() >= 0.0, "{p}");
    }
    assert_eq!(proc(&v, "reference")["delay"]["samples"], 0.0);
    assert_eq!(proc(&v, "detect")["delay"]["samples"], 15.0);
    // 32 channels x 5 spikes/s for the 1.5 s after the noise estimate: dozens of events
    let s = proc(&v, "detect")["summary"].as_str().unwrap().to_string();
    let n: u64 = s
        .rsplit("; ")
        .next()
        .and_then(|e| e.strip_suffix(" events"))
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("{s}"));
    assert!(n > 20, "{s}");
    // with a refractory period as long as a filtered spike rings: one event per spike at
    // most, and spikes come only from the source
    let g = proc(&v, "electrodes")["summary"]
        .as_str()
        .unwrap()
        .to_string();
    let spikes: u64 = g
        .strip_suffix(" spikes")
        .and_then(|e| e.rsplit(", ").next())
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("{g}"));
    assert!(n <= spikes, "{n} events from {spikes} spikes");
    let log = proc(&v, "log")["summary"].as_str().unwrap().to_string();
    assert!(log.contains("logged 2000 ticks"), "{log}");
}

#[test]
fn a_block_with_bad_options_or_signals_is_refused_before_anything_starts() {
    let d = dir("bad");
    let model = write(
        &d,
        "bad.yaml",
        "config: {tick_us: 1000}\n\
         signals:\n  raw: {shape: [30, 4], dtype: int16}\n  y: {shape: [30, 4], dtype: float32}\n  \
         ev: {shape: [8, 3], dtype: float64}\n\
         sources:\n  gen: {driver: synthetic, out: [raw]}\n\
         modules:\n  bp:\n    block: lowpass\n    options:\n      cutoff: 20000\n    in: [raw]\n    out: [y]\n  \
         det:\n    block: spikes\n    options:\n      sign: up\n    in: [y]\n    out: [ev]\n",
    );
    for check in [false, true] {
        let mut args = vec!["run"];
        if check {
            args.push("--check");
        }
        args.push(model.to_str().unwrap());
        let o = common::rtloop_cmd()
            .current_dir(&d)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        // every problem at once: the cutoff above Nyquist at its line, the int16 input at
        // its in: entry, the spikes block's bad sign at its line and its output, not
        // variable, at its out: entry
        assert!(e.contains(": 4 problems"), "{e}");
        assert!(
            e.contains("line 12: module 'bp': block 'lowpass': cutoff 20000 Hz: must lie strictly between 0 and the Nyquist frequency 15000 Hz"),
            "{e}"
        );
        assert!(
            e.contains("line 20: module 'det': block 'spikes': writes 'ev' (3 values per row of float64, not variable)"),
            "{e}"
        );
        assert!(
            e.contains("line 13: module 'bp': block 'lowpass': reads 'raw' of dtype int16; a block reads float32 or float64 signals"),
            "{e}"
        );
        assert!(
            e.contains("line 18: module 'det': block 'spikes': sign: \"up\" is not allowed; give one of negative, positive, both"),
            "{e}"
        );
    }
}

#[test]
fn decimate_then_phase_chain_as_the_offline_blocks_do() {
    let _g = serial();
    let d = dir("phase");
    let name = format!("blkph{}", std::process::id());
    let (raw, dec, ev) = (
        format!("{name}-raw"),
        format!("{name}-dec"),
        format!("{name}-ev"),
    );
    let _kept = [
        StreamGuard::new(&raw),
        StreamGuard::new(&dec),
        StreamGuard::new(&ev),
    ];
    // a 10 Hz sine on 2 channels at 30 kHz, decimated to 1 kHz (one row per tick), its
    // phase tracked in 8-12 Hz with a trigger at the peak
    let model = write(
        &d,
        "m.yaml",
        &format!(
            "config: {{name: {name}, tick_us: 1000}}\n\
             signals:\n  raw: {{shape: [30, 2], dtype: float64}}\n  \
             slow: {{shape: [1, 2], dtype: float64}}\n  \
             ev: {{shape: [4, 3], dtype: float64, variable: true}}\n\
             sources:\n  gen: {{driver: synthetic, out: [raw], options: {{frequency: 10}}}}\n\
             modules:\n  \
             dec: {{block: decimate, options: {{factor: 30}}, in: [raw], out: [slow]}}\n  \
             ph: {{block: phase, options: {{band: [8, 12], window: 500, target: 0}}, in: [slow], out: [ev]}}\n\
             sinks:\n  a: {{driver: stream_out, in: [raw], options: {{stream: {raw}, keep: true}}}}\n  \
             b: {{driver: stream_out, in: [slow], options: {{stream: {dec}, keep: true}}}}\n  \
             c: {{driver: stream_out, in: [ev], options: {{stream: {ev}, keep: true}}}}\n"
        ),
    );
    let ticks = 3000u64;
    let (v, o) = run(&model, ticks);
    assert!(o.status.success(), "{}", stderr(&o));
    let dec_delay = rtloop_dsp::Decimator::<f64>::new(2, 30)
        .unwrap()
        .delay_samples();
    assert_eq!(
        proc(&v, "dec")["delay"]["samples"].as_f64().unwrap(),
        dec_delay
    );
    assert_eq!(proc(&v, "ph")["delay"]["samples"], 0.0);

    // the decimated signal is the decimator over the whole source, to the last bit
    let mut x = values::<f64>(&raw);
    assert_eq!(x.len() as u64, ticks * 30 * 2);
    let mut want = vec![0.0; ticks as usize * 2];
    rtloop_dsp::Decimator::<f64>::new(2, 30)
        .unwrap()
        .process(&mut x, &mut want)
        .unwrap();
    let y = values::<f64>(&dec);
    assert_eq!(y, want);

    // the triggers are the tracker's over the decimated signal (stream index: after the
    // signal's one row of zero history)
    let events: Vec<[f64; 3]> = values::<f64>(&ev)
        .chunks_exact(3)
        .map(|r| [r[0], r[1], r[2]])
        .collect();
    let mut offline = Vec::new();
    rtloop_dsp::PhaseTracker::new(rtloop_dsp::PhaseConfig {
        channels: 2,
        rate: 1000.0,
        band: (8.0, 12.0),
        window: 500,
        target: 0.0,
        min_amplitude: 0.0,
        refractory: 0,
    })
    .unwrap()
    .process(&y, |t| {
        offline.push([t.channel as f64, (t.sample + 1) as f64, t.phase]);
    })
    .unwrap();
    assert_eq!(events, offline);
    // a 10 Hz peak once a cycle on each channel for the 2.5 s after the first window
    for c in 0..2 {
        let n = events.iter().filter(|e| e[0] == c as f64).count();
        assert!((20..=30).contains(&n), "channel {c}: {n} triggers");
    }
}
