//! The IIR filters against scipy, the reference implementation, run in the same test: the
//! designs against `scipy.signal.butter(..., output="sos")` / `iirnotch`, and filtering
//! chunk by chunk against `scipy.signal.sosfilt` with its `zi` carried over the same chunks
//! (chunks of one sample included): float64 within 1e-9 and float32 within 1e-5 of the
//! output's largest magnitude.
//!
//! Re-referencing is held against numpy's mean and median over the same channels, the
//! envelope against numpy's moving average of the squares, decimation against scipy's
//! `sosfilt(butter(8, 0.8 / factor, output="sos"), x)[::factor]`, and the phase of the
//! phase tracker's triggers against the offline (non-causal) Hilbert phase.
//!
//! scipy runs in the Python that runs rtloop (`$RTLOOP_PYTHON`, else `python3`).

use std::process::Command;

use rtloop_dsp::{
    design, Band, Decimator, MovingRms, PhaseConfig, PhaseTracker, Reference, Reref, Section,
    SosFilter,
};

const SCIPY: &str = r#"
import json, sys
import numpy as np
from scipy import signal
a = json.loads(sys.argv[1])
if a["kind"] == "notch":
    b, den = signal.iirnotch(a["wn"][0], a["q"], fs=a["rate"])
    sos = np.concatenate([b, den])[None, :]
else:
    wn = a["wn"] if len(a["wn"]) > 1 else a["wn"][0]
    sos = signal.butter(a["order"], wn, btype=a["kind"], output="sos", fs=a["rate"])
dt = np.dtype(a["dtype"])
x = np.fromfile(a["in"], dtype=dt).reshape(-1, a["ch"])
# rtloop's own sections, so that the filtering is compared on its own
s = np.asarray(a["sections"], dtype=dt)
zi = np.zeros((s.shape[0], 2, a["ch"]), dtype=dt)
out, i = [], 0
for c in a["chunks"]:
    y, zi = signal.sosfilt(s, x[i:i + c], axis=0, zi=zi)
    assert y.dtype == dt, y.dtype
    out.append(y)
    i += c
np.concatenate(out).tofile(a["out"])
print(json.dumps(sos.tolist()))
"#;

fn python() -> String {
    rtloop_sys::python().display().to_string()
}

/// Run Python with `args` (`-c SCRIPT ...`), `inp` and `outp` after them, and read the
/// float64 values it wrote to `outp`.
fn python_out(args: &[&str], inp: &std::path::Path, outp: &std::path::Path) -> Vec<f64> {
    let run = Command::new(python())
        .args(args)
        .arg(inp)
        .arg(outp)
        .output()
        .expect("run Python");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    f64::from_bytes(&std::fs::read(outp).unwrap())
}

/// The largest absolute difference between `a` and `b`, value by value.
fn largest_difference(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
}

/// Deterministic test input: a sine per channel in the passband and out of it, plus noise.
fn input(n: usize, ch: usize, rate: f64) -> Vec<f64> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    (0..n)
        .flat_map(|i| (0..ch).map(move |c| (i, c)))
        .map(|(i, c)| {
            let t = i as f64 / rate;
            let f1 = 7.0 + 13.0 * c as f64;
            let f2 = rate * (0.11 + 0.07 * c as f64);
            100.0 * (std::f64::consts::TAU * f1 * t).sin()
                + 40.0 * (std::f64::consts::TAU * f2 * t).sin()
                + 30.0 * noise()
        })
        .collect()
}

/// Chunk lengths summing to `n`: runs of one-sample chunks, then random ones up to 300.
fn chunking(n: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut out = Vec::new();
    let mut left = n;
    while left > 0 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let c = if out.len() % 5 < 2 {
            1
        } else {
            1 + (x % 300) as usize
        };
        let c = c.min(left);
        out.push(c);
        left -= c;
    }
    out
}

struct Case {
    kind: &'static str,
    band: Band,
    order: usize,
    rate: f64,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            kind: "lowpass",
            band: Band::Lowpass { cutoff: 300.0 },
            order: 4,
            rate: 30_000.0,
        },
        Case {
            kind: "highpass",
            band: Band::Highpass { cutoff: 300.0 },
            order: 3,
            rate: 30_000.0,
        },
        Case {
            kind: "bandpass",
            band: Band::Bandpass {
                low: 150.0,
                high: 250.0,
            },
            order: 3,
            rate: 1250.0,
        },
        Case {
            kind: "bandpass",
            band: Band::Bandpass {
                low: 8.0,
                high: 12.0,
            },
            order: 2,
            rate: 250.0,
        },
        Case {
            kind: "notch",
            band: Band::Notch {
                freq: 50.0,
                q: 30.0,
            },
            order: 2,
            rate: 1000.0,
        },
    ]
}

trait Sample: num_traits::Float + std::fmt::Debug {
    const NAME: &'static str;
    const TOL: f64;
    fn to_bytes(v: &[Self]) -> Vec<u8>;
    fn from_bytes(b: &[u8]) -> Vec<Self>;
}

impl Sample for f64 {
    const NAME: &'static str = "float64";
    const TOL: f64 = 1e-9;
    fn to_bytes(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn from_bytes(b: &[u8]) -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

impl Sample for f32 {
    const NAME: &'static str = "float32";
    const TOL: f64 = 1e-5;
    fn to_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn from_bytes(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }
}

fn against_scipy<T: Sample>(case: &Case, seed: u64) {
    const N: usize = 3000;
    const CH: usize = 5;
    let dir = rtloop_testkit::TempDir::new("dsp-scipy");
    let sections = design(case.band, case.order, case.rate).unwrap();
    let x: Vec<T> = input(N, CH, case.rate)
        .into_iter()
        .map(|v| T::from(v).unwrap())
        .collect();
    let chunks = chunking(N, seed);
    assert!(chunks.iter().filter(|&&c| c == 1).count() > 10);
    let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    std::fs::write(&inp, T::to_bytes(&x)).unwrap();
    let wn: Vec<f64> = match case.band {
        Band::Lowpass { cutoff } | Band::Highpass { cutoff } => vec![cutoff],
        Band::Bandpass { low, high } => vec![low, high],
        Band::Notch { freq, .. } => vec![freq],
    };
    let q = match case.band {
        Band::Notch { q, .. } => q,
        _ => 0.0,
    };
    let rows: Vec<Vec<f64>> = sections
        .iter()
        .map(|s| s.b.iter().chain(&s.a).copied().collect())
        .collect();
    let args = serde_json::json!({
        "kind": case.kind, "wn": wn, "q": q, "order": case.order, "rate": case.rate,
        "dtype": T::NAME, "ch": CH, "chunks": chunks, "sections": rows,
        "in": inp, "out": outp,
    });
    let run = Command::new(python())
        .args(["-c", SCIPY, &args.to_string()])
        .output()
        .expect("run Python");
    assert!(
        run.status.success(),
        "scipy ({}): {}",
        python(),
        String::from_utf8_lossy(&run.stderr)
    );

    // the design, coefficient by coefficient
    let want: Vec<Vec<f64>> = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(want.len(), sections.len(), "{} sections", case.kind);
    for (k, (w, s)) in want.iter().zip(&sections).enumerate() {
        let got: Vec<f64> = s.b.iter().chain(&s.a).copied().collect();
        for (g, w) in got.iter().zip(w) {
            assert!(
                (g - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{} section {k}: rtloop {got:?}, scipy {w:?}",
                case.kind
            );
        }
    }

    // the filtering, chunk by chunk
    let mut f = SosFilter::<T>::new(&sections, CH).unwrap();
    let mut y = x.clone();
    let mut at = 0;
    for &c in &chunks {
        f.process(&mut y[at * CH..(at + c) * CH]).unwrap();
        at += c;
    }
    let want = T::from_bytes(&std::fs::read(&outp).unwrap());
    assert_eq!(want.len(), y.len());
    let scale = want
        .iter()
        .map(|v| v.to_f64().unwrap().abs())
        .fold(0.0, f64::max);
    let worst = y
        .iter()
        .zip(&want)
        .map(|(a, b)| (a.to_f64().unwrap() - b.to_f64().unwrap()).abs())
        .fold(0.0, f64::max);
    assert!(
        worst <= T::TOL * scale,
        "{} {}: largest difference {worst:e} against scipy, above {} of the output's largest magnitude {scale}",
        case.kind,
        T::NAME,
        T::TOL
    );
}

#[test]
fn float64_equals_scipy_sosfilt_for_any_chunking() {
    for (k, c) in cases().iter().enumerate() {
        against_scipy::<f64>(c, 11 + k as u64);
    }
}

#[test]
fn float32_equals_scipy_sosfilt_for_any_chunking() {
    for (k, c) in cases().iter().enumerate() {
        against_scipy::<f32>(c, 101 + k as u64);
    }
}

/// The section type is plain data a model file or Python can carry.
#[test]
fn sections_are_plain_coefficients() {
    let s: Vec<Section> = design(Band::Lowpass { cutoff: 100.0 }, 4, 1000.0).unwrap();
    assert_eq!(s.len(), 2);
    assert!(s.iter().all(|s| s.a[0] == 1.0));
}

const NUMPY_REREF: &str = r#"
import sys, numpy as np
ch, ref, kind, inp, out = int(sys.argv[1]), [int(c) for c in sys.argv[2].split(",")], sys.argv[3], sys.argv[4], sys.argv[5]
x = np.fromfile(inp, dtype=np.float64).reshape(-1, ch)
r = np.mean(x[:, ref], axis=1) if kind == "average" else np.median(x[:, ref], axis=1)
(x - r[:, None]).tofile(out)
"#;

/// Common average and median references over chosen channels (an odd and an even count)
/// equal numpy's, value for value.
#[test]
fn rereferencing_equals_numpy() {
    const CH: usize = 7;
    let dir = rtloop_testkit::TempDir::new("dsp-reref");
    let x = input(500, CH, 1000.0);
    let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    std::fs::write(&inp, f64::to_bytes(&x)).unwrap();
    for (kind, name) in [
        (Reference::Average, "average"),
        (Reference::Median, "median"),
    ] {
        for refs in [&[0usize, 2, 3, 6][..], &[1, 4, 5][..]] {
            let mut r = Reref::<f64>::new(CH, Some(refs), kind).unwrap();
            let mut y = x.clone();
            for chunk in y.chunks_mut(13 * CH) {
                r.process(chunk).unwrap();
            }
            let list: Vec<String> = refs.iter().map(ToString::to_string).collect();
            let want = python_out(
                &["-c", NUMPY_REREF, &CH.to_string(), &list.join(","), name],
                &inp,
                &outp,
            );
            let worst = largest_difference(&y, &want);
            assert!(
                worst <= 1e-12,
                "{name} over {refs:?}: largest difference {worst:e}"
            );
        }
    }
}

const NUMPY_RMS: &str = r#"
import sys, numpy as np
ch, w, inp, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
x = np.fromfile(inp, dtype=np.float64).reshape(-1, ch)
y = np.stack([np.sqrt(np.convolve(x[:, c] ** 2, np.ones(w) / w)[: len(x)]) for c in range(ch)], axis=1)
y.tofile(out)
"#;

/// The moving RMS equals numpy's (samples before the first as zeros), over chunks of any
/// length and past many windows (where a running sum would drift).
#[test]
fn the_envelope_equals_numpy() {
    const CH: usize = 3;
    let dir = rtloop_testkit::TempDir::new("dsp-rms");
    let x = input(5000, CH, 1000.0);
    let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    std::fs::write(&inp, f64::to_bytes(&x)).unwrap();
    for w in [1usize, 37, 400] {
        let mut e = MovingRms::<f64>::new(CH, w).unwrap();
        let mut y = x.clone();
        let mut at = 0;
        for c in chunking(5000, w as u64) {
            e.process(&mut y[at * CH..(at + c) * CH]).unwrap();
            at += c;
        }
        let want = python_out(
            &["-c", NUMPY_RMS, &CH.to_string(), &w.to_string()],
            &inp,
            &outp,
        );
        let scale = want.iter().copied().fold(0.0, f64::max);
        let worst = largest_difference(&y, &want);
        assert!(
            worst <= 1e-9 * scale,
            "window {w}: largest difference {worst:e}"
        );
    }
}

const SCIPY_DECIMATE: &str = r#"
import sys, numpy as np
from scipy import signal
ch, q, inp, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
x = np.fromfile(inp, dtype=np.float64).reshape(-1, ch)
sos = signal.butter(8, 0.8 / q, output="sos")
signal.sosfilt(sos, x, axis=0)[::q].tofile(out)
"#;

/// Decimation over chunks of any length keeps the samples scipy keeps, filtered alike.
#[test]
fn decimation_equals_scipy() {
    const CH: usize = 2;
    let dir = rtloop_testkit::TempDir::new("dsp-decimate");
    let x = input(3000, CH, 1000.0);
    let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    std::fs::write(&inp, f64::to_bytes(&x)).unwrap();
    for q in [2usize, 3, 10] {
        let mut d = Decimator::<f64>::new(CH, q).unwrap();
        let mut y = x.clone();
        let mut kept = Vec::new();
        let mut at = 0;
        for c in chunking(3000, 7 * q as u64) {
            let mut out = vec![0.0; d.kept(c) * CH];
            d.process(&mut y[at * CH..(at + c) * CH], &mut out).unwrap();
            kept.extend(out);
            at += c;
        }
        let want = python_out(
            &["-c", SCIPY_DECIMATE, &CH.to_string(), &q.to_string()],
            &inp,
            &outp,
        );
        assert_eq!(kept.len(), want.len(), "factor {q}");
        let scale = want.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let worst = largest_difference(&kept, &want);
        assert!(
            worst <= 1e-9 * scale,
            "factor {q}: largest difference {worst:e}"
        );
    }
}

const SCIPY_PHASE: &str = r#"
import sys, numpy as np
from scipy import signal
rate, lo, hi, inp, out = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
x = np.fromfile(inp, dtype=np.float64)
b, a = signal.butter(2, [lo, hi], btype="bandpass", fs=rate)
np.angle(signal.hilbert(signal.filtfilt(b, a, x))).tofile(out)
"#;

/// Signals of known phase plus noise, and EEG-like ones (1/f noise and alpha bursts):
/// the phase, offline, at each trigger the tracker fired at phase 0 (the alpha peak): its
/// circular mean and spread (circular standard deviation), in degrees.
#[test]
fn phase_triggers_against_the_offline_hilbert_phase() {
    const RATE: f64 = 500.0;
    let n = (RATE * 60.0) as usize;
    let mut x = 0xD1B5_4A32_D192_ED03u64;
    let mut gauss = move || {
        (0..12)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64
            })
            .sum::<f64>()
            - 6.0
    };
    // a 9-11 Hz rhythm whose frequency and amplitude drift, in white noise (SNR about 3)
    let mut phase = 0.0;
    let known: Vec<f64> = (0..n)
        .map(|i| {
            let t = i as f64 / RATE;
            let f = 10.0 + (std::f64::consts::TAU * 0.05 * t).sin();
            phase += std::f64::consts::TAU * f / RATE;
            let amp = 1.0 + 0.3 * (std::f64::consts::TAU * 0.11 * t).sin();
            2.0 * amp * phase.cos() + gauss()
        })
        .collect();
    // EEG-like: 1/f noise (Kellet's pink filter on white noise) and alpha in bursts
    let mut b = [0.0f64; 7];
    let eeg: Vec<f64> = (0..n)
        .map(|i| {
            let w = gauss();
            b[0] = 0.99886 * b[0] + w * 0.0555179;
            b[1] = 0.99332 * b[1] + w * 0.0750759;
            b[2] = 0.96900 * b[2] + w * 0.153_852;
            b[3] = 0.86650 * b[3] + w * 0.3104856;
            b[4] = 0.55000 * b[4] + w * 0.5329522;
            b[5] = -0.7616 * b[5] - w * 0.0168980;
            let pink = b[..6].iter().sum::<f64>() + b[6] + w * 0.5362;
            b[6] = w * 0.115926;
            let t = i as f64 / RATE;
            let burst = (0.5 + 0.5 * (std::f64::consts::TAU * 0.2 * t).sin()).powi(2);
            pink * 0.5 + 3.0 * burst * (std::f64::consts::TAU * 10.0 * t).cos()
        })
        .collect();
    let dir = rtloop_testkit::TempDir::new("dsp-phase");
    for (what, sig, max_mean, max_spread) in [
        ("drifting 10 Hz in noise", &known, 15.0, 35.0),
        ("EEG-like alpha bursts", &eeg, 25.0, 60.0),
    ] {
        let (inp, outp) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
        std::fs::write(&inp, f64::to_bytes(sig)).unwrap();
        let offline = python_out(
            &["-c", SCIPY_PHASE, &RATE.to_string(), "8", "12"],
            &inp,
            &outp,
        );
        let mut p = PhaseTracker::new(PhaseConfig {
            channels: 1,
            rate: RATE,
            band: (8.0, 12.0),
            window: 250,
            target: 0.0,
            min_amplitude: 0.5,
            refractory: 25,
        })
        .unwrap();
        let mut fired = Vec::new();
        for chunk in sig.chunks(5) {
            p.process(chunk, |t| fired.push(t.sample)).unwrap();
        }
        // leave out the filtfilt edges
        let errs: Vec<f64> = fired
            .iter()
            .filter(|&&s| s > 1000 && (s as usize) < n - 1000)
            .map(|&s| offline[s as usize])
            .collect();
        let (c, sn) = errs
            .iter()
            .fold((0.0, 0.0), |(c, s), e| (c + e.cos(), s + e.sin()));
        let r = (c * c + sn * sn).sqrt() / errs.len() as f64;
        let mean = sn.atan2(c).to_degrees();
        let spread = (-2.0 * r.ln()).sqrt().to_degrees();
        println!("{what}: {} triggers at phase 0; offline phase there: circular mean {mean:.1} deg, spread {spread:.1} deg", errs.len());
        assert!(errs.len() > 100, "{what}: {} triggers", errs.len());
        assert!(
            mean.abs() < max_mean && spread < max_spread,
            "{what}: mean {mean:.1}, spread {spread:.1} deg"
        );
    }
}
