// Band-pass 300-3000 Hz (two biquads: high-pass then low-pass, 2nd-order Butterworth each,
// state kept across ticks) and a threshold at -4.5 robust standard deviations per channel.
// The same detector as detect.py, as a Rust module (see docs/runtime-rust-modules.md).

const FS: f64 = 30_000.0;
const LEARN_TICKS: u64 = 200;
const K: f64 = 4.5;

#[derive(Default)]
struct Detector {
    hp: Vec<[f64; 2]>, // per-channel biquad state (transposed direct form II)
    lp: Vec<[f64; 2]>,
    sigma: Vec<f64>,
    ticks: u64,
}

#[derive(Clone, Copy)]
struct Biquad {
    b: [f64; 3],
    a: [f64; 2],
}

fn butter2(fc: f64, high: bool) -> Biquad {
    let w = (std::f64::consts::PI * fc / FS).tan();
    let r2 = std::f64::consts::SQRT_2;
    let n = 1.0 / (1.0 + r2 * w + w * w);
    let (b0, b1, b2) = if high {
        (n, -2.0 * n, n)
    } else {
        (w * w * n, 2.0 * w * w * n, w * w * n)
    };
    Biquad {
        b: [b0, b1, b2],
        a: [2.0 * (w * w - 1.0) * n, (1.0 - r2 * w + w * w) * n],
    }
}

fn run(q: &Biquad, s: &mut [f64; 2], x: f64) -> f64 {
    let y = q.b[0] * x + s[0];
    s[0] = q.b[1] * x - q.a[0] * y + s[1];
    s[1] = q.b[2] * x - q.a[1] * y;
    y
}

pub fn step(t: &mut Tick) {
    let hp = butter2(300.0, true);
    let lp = butter2(3000.0, false);
    let channels = t.row_len_in(0);
    let raw: Vec<f32> = t.input::<f32>(0).to_vec();
    let rows = raw.len() / channels;
    let d = t.state::<Detector>();
    if d.hp.is_empty() {
        d.hp = vec![[0.0; 2]; channels];
        d.lp = vec![[0.0; 2]; channels];
        d.sigma = vec![0.0; channels];
    }
    d.ticks += 1;
    let learning = d.ticks <= LEARN_TICKS;
    let mut crossed = vec![0u8; channels];
    let mut abs = vec![0.0f64; rows];
    for c in 0..channels {
        for r in 0..rows {
            let y = run(&lp, &mut d.lp[c], run(&hp, &mut d.hp[c], f64::from(raw[r * channels + c])));
            abs[r] = y.abs();
            if !learning && y < -K * d.sigma[c] {
                crossed[c] = 1;
            }
        }
        if learning {
            abs.sort_by(|a, b| a.total_cmp(b));
            let med = abs[rows / 2] / 0.6745;
            d.sigma[c] += (med - d.sigma[c]) / d.ticks as f64;
        }
    }
    let any = crossed.iter().any(|&x| x != 0);
    t.output::<u8>(0).copy_from_slice(&crossed);
    t.output::<u8>(1)[0] = u8::from(any);
}
