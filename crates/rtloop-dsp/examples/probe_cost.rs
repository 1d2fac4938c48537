//! The cost of the spike path on a Neuropixels probe's data: 384 channels at 30 kHz in 1 ms
//! chunks, float32: a Butterworth band-pass 300-6000 Hz, a common median reference, and
//! threshold-crossing detection, each as a share of one core, then all three.
//! `cargo run --release -p rtloop-dsp --example probe_cost [ORDER] [SECONDS] [median|average] [ROUNDS]`.
//!
//! Beside it, in turn and in the same run, its references doing the same work: a plain Rust
//! loop (each channel's biquads one channel at a time, the reference as a mean or a sorted
//! median per sample, the threshold compared per value with the noise estimate held fixed),
//! and `scipy.signal.sosfilt` on the same chunks with `zi` carried (in `$RTLOOP_PYTHON`, else
//! `python3`; skipped, and said so, when it has no scipy).

use std::time::Instant;

use rtloop_dsp::{design, Band, Reference, Reref, Sign, SosFilter, SpikeConfig, SpikeDetector};

const CH: usize = 384;
const RATE: f64 = 30_000.0;
const CHUNK: usize = 30;

fn main() {
    let mut args = std::env::args().skip(1);
    let order: usize = args
        .next()
        .map_or(2, |v| v.parse().expect("ORDER: a whole number"));
    let seconds: f64 = args
        .next()
        .map_or(5.0, |v| v.parse().expect("SECONDS: a number"));
    let kind = match args.next().as_deref() {
        None | Some("median") => Reference::Median,
        Some("average") => Reference::Average,
        Some(other) => panic!("{other:?}: the reference is median or average"),
    };
    let sections = design(
        Band::Bandpass {
            low: 300.0,
            high: 6000.0,
        },
        order,
        RATE,
    )
    .expect("a valid band-pass");
    let mut filter = SosFilter::<f32>::new(&sections, CH).expect("a filter");
    let mut reref = Reref::<f32>::new(CH, None, kind).expect("a reference");
    let mut detect = SpikeDetector::<f32>::new(SpikeConfig {
        channels: CH,
        k: 5.0,
        sign: Sign::Negative,
        refractory: 15,
        peak_window: 15,
        noise_window: 30_000,
    })
    .expect("a detector");
    // noise, and a spike on one channel in every 50 samples, so that the detector's noise
    // estimate and its crossings are both exercised
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut input: Vec<f32> = (0..CH * CHUNK * 100)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 40.0
        })
        .collect();
    for s in (0..CHUNK * 100).step_by(50) {
        let c = (s * 7) % CH;
        for (k, v) in [-100.0, -400.0, -600.0, -400.0, -100.0].iter().enumerate() {
            if s + k < CHUNK * 100 {
                input[(s + k) * CH + c] += v;
            }
        }
    }
    let chunks = (seconds * RATE / CHUNK as f64) as usize;
    let data = chunks as f64 * CHUNK as f64 / RATE;
    let pct = |s: f64| 100.0 * s / data;
    let rounds: usize = args
        .next()
        .map_or(3, |v| v.parse().expect("ROUNDS: a whole number"));
    println!(
        "{CH} ch x {RATE} Hz float32, {CHUNK}-sample chunks, {data:.1} s of data per round, band-pass order {order} ({} sections), common {kind:?} reference; % of one core",
        sections.len()
    );
    println!("round  what          band-pass  reference  detection  all three  spikes");
    for round in 1..=rounds {
        // rtloop-dsp
        let mut spent = [0.0f64; 3];
        let mut spikes = 0u64;
        let mut chunk = vec![0f32; CH * CHUNK];
        for k in 0..chunks {
            let at = (k % 100) * CH * CHUNK;
            chunk.copy_from_slice(&input[at..at + CH * CHUNK]);
            let t = Instant::now();
            filter.process(&mut chunk).expect("whole samples");
            let t1 = Instant::now();
            reref.process(&mut chunk).expect("whole samples");
            let t2 = Instant::now();
            detect
                .process(&chunk, |_| spikes += 1)
                .expect("whole samples");
            let t3 = Instant::now();
            spent[0] += (t1 - t).as_secs_f64();
            spent[1] += (t2 - t1).as_secs_f64();
            spent[2] += (t3 - t2).as_secs_f64();
        }
        row(round, "rtloop-dsp", spent.map(pct), spikes);
        // the plain loop, the same work
        let mut plain = Plain::new(&sections, kind, detect.thresholds());
        let mut spent = [0.0f64; 3];
        let mut spikes = 0u64;
        for k in 0..chunks {
            let at = (k % 100) * CH * CHUNK;
            chunk.copy_from_slice(&input[at..at + CH * CHUNK]);
            let t = Instant::now();
            plain.filter(&mut chunk);
            let t1 = Instant::now();
            plain.reref(&mut chunk);
            let t2 = Instant::now();
            spikes += plain.detect(&chunk);
            let t3 = Instant::now();
            spent[0] += (t1 - t).as_secs_f64();
            spent[1] += (t2 - t1).as_secs_f64();
            spent[2] += (t3 - t2).as_secs_f64();
        }
        row(round, "plain loop", spent.map(pct), spikes);
        // scipy's sosfilt on chunks of the same shape
        match scipy_sosfilt(order, chunks) {
            Ok(seconds) => println!(
                "{round:<6} {:<13} {:>9.1}  {:>9}  {:>9}  {:>9}  {:>6}",
                "scipy sosfilt",
                pct(seconds),
                "-",
                "-",
                "-",
                "-"
            ),
            Err(why) => println!("{round:<6} scipy sosfilt  not measured: {why}"),
        }
    }
}

fn row(round: usize, what: &str, p: [f64; 3], spikes: u64) {
    println!(
        "{round:<6} {what:<13} {:>9.1}  {:>9.1}  {:>9.1}  {:>9.1}  {spikes:>6}",
        p[0],
        p[1],
        p[2],
        p.iter().sum::<f64>()
    );
}

/// The spike path written as the plain loops anyone would write first: the reference the
/// blocks are judged against.
struct Plain {
    /// (b0, b1, b2, a1, a2) per section.
    sos: Vec<[f32; 5]>,
    /// Per channel, per section, the two DF2T state values.
    state: Vec<Vec<[f32; 2]>>,
    median: bool,
    thresholds: Vec<f32>,
    /// Samples left of each channel's refractory period.
    quiet: Vec<usize>,
    scratch: Vec<f32>,
}

impl Plain {
    fn new(sections: &[rtloop_dsp::Section], kind: Reference, thresholds: &[f32]) -> Plain {
        Plain {
            sos: sections
                .iter()
                .map(|s| {
                    [
                        s.b[0] as f32,
                        s.b[1] as f32,
                        s.b[2] as f32,
                        s.a[1] as f32,
                        s.a[2] as f32,
                    ]
                })
                .collect(),
            state: vec![vec![[0.0; 2]; sections.len()]; CH],
            median: kind == Reference::Median,
            thresholds: thresholds.to_vec(),
            quiet: vec![0; CH],
            scratch: vec![0.0; CH],
        }
    }

    fn filter(&mut self, chunk: &mut [f32]) {
        for c in 0..CH {
            for s in 0..chunk.len() / CH {
                let mut x = chunk[s * CH + c];
                for (k, q) in self.sos.iter().enumerate() {
                    let z = &mut self.state[c][k];
                    let y = q[0] * x + z[0];
                    z[0] = q[1] * x - q[3] * y + z[1];
                    z[1] = q[2] * x - q[4] * y;
                    x = y;
                }
                chunk[s * CH + c] = x;
            }
        }
    }

    fn reref(&mut self, chunk: &mut [f32]) {
        for row in chunk.chunks_exact_mut(CH) {
            let r = if self.median {
                self.scratch.copy_from_slice(row);
                self.scratch.sort_unstable_by(f32::total_cmp);
                (self.scratch[CH / 2 - 1] + self.scratch[CH / 2]) / 2.0
            } else {
                row.iter().sum::<f32>() / CH as f32
            };
            for v in row.iter_mut() {
                *v -= r;
            }
        }
    }

    fn detect(&mut self, chunk: &[f32]) -> u64 {
        let mut n = 0;
        for row in chunk.chunks_exact(CH) {
            for (c, &v) in row.iter().enumerate() {
                if self.quiet[c] > 0 {
                    self.quiet[c] -= 1;
                } else if v < -self.thresholds[c] {
                    n += 1;
                    self.quiet[c] = 15;
                }
            }
        }
        n
    }
}

/// Seconds scipy's sosfilt takes over `chunks` chunks of CHUNK x CH float32 with `zi`
/// carried, timed inside Python.
fn scipy_sosfilt(order: usize, chunks: usize) -> Result<f64, String> {
    let python = rtloop_sys::python();
    let script = format!(
        "import time, numpy as np\n\
         from scipy.signal import butter, sosfilt, sosfilt_zi\n\
         sos = butter({order}, [300, 6000], 'bandpass', output='sos', fs={RATE}).astype('float32')\n\
         x = (np.random.default_rng(1).standard_normal((100, {CHUNK}, {CH})) * 10).astype('float32')\n\
         zi = np.zeros((sos.shape[0], 2, {CH}), dtype='float32')\n\
         t = time.perf_counter()\n\
         for k in range({chunks}):\n    y, zi = sosfilt(sos, x[k % 100], axis=0, zi=zi)\n\
         print(time.perf_counter() - t)\n"
    );
    let out = std::process::Command::new(&python)
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|e| format!("{e}"))
}
