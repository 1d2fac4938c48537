//! The cost of the spike path on a Neuropixels probe's data: 384 channels at 30 kHz in 1 ms
//! chunks, float32: a Butterworth band-pass 300-6000 Hz, a common median reference, and
//! threshold-crossing detection, each as a share of one core, then all three.
//! `cargo run --release -p rtloop-dsp --example probe_cost [ORDER] [SECONDS] [median|average]`.

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
    let pct = |s: f64| 100.0 * s / data;
    println!(
        "{CH} ch x {RATE} Hz float32, {CHUNK}-sample chunks, {data:.1} s of data, % of one core: band-pass (order {order}, {} sections) {:.1}, common {kind:?} reference {:.1}, detection {:.1} ({spikes} spikes), all three {:.1}",
        sections.len(),
        pct(spent[0]),
        pct(spent[1]),
        pct(spent[2]),
        pct(spent.iter().sum())
    );
}
