//! The cost of a band-pass on a Neuropixels probe's data: 384 channels at 30 kHz, in 1 ms
//! chunks, float32, as a share of one core. `cargo run --release -p rtloop-dsp --example
//! filter_cost [ORDER] [SECONDS]`.

use std::time::Instant;

use rtloop_dsp::{design, Band, SosFilter};

fn main() {
    let mut args = std::env::args().skip(1);
    let order: usize = args
        .next()
        .map_or(2, |v| v.parse().expect("ORDER: a whole number"));
    let seconds: f64 = args
        .next()
        .map_or(5.0, |v| v.parse().expect("SECONDS: a number"));
    const CH: usize = 384;
    const RATE: f64 = 30_000.0;
    const CHUNK: usize = 30;
    let sections = design(
        Band::Bandpass {
            low: 300.0,
            high: 6000.0,
        },
        order,
        RATE,
    )
    .expect("a valid band-pass");
    let mut f = SosFilter::<f32>::new(&sections, CH).expect("a filter");
    let mut chunk: Vec<f32> = (0..CH * CHUNK).map(|i| (i % 97) as f32 - 48.0).collect();
    let chunks = (seconds * RATE / CHUNK as f64) as usize;
    let t = Instant::now();
    for _ in 0..chunks {
        f.process(&mut chunk).expect("whole samples");
        std::hint::black_box(&mut chunk);
    }
    let spent = t.elapsed().as_secs_f64();
    let data = chunks as f64 * CHUNK as f64 / RATE;
    println!(
        "band-pass 300-6000 Hz, order {order} ({} sections), {CH} ch x {RATE} Hz float32 in {CHUNK}-sample chunks: {:.2} s of CPU for {data:.1} s of data = {:.1} % of one core",
        sections.len(),
        spent,
        100.0 * spent / data
    );
}
