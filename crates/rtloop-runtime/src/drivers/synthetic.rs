//! `synthetic` source: sine, noise or spikes on every channel, at the signal's rate
//! (rows per tick / tick period), so models run with no hardware.

use super::{parse_options, DriverCtx, DriverError, OutBuf, Source, TickInfo};
use crate::model::Signal;
use rtloop_stream::DType;

#[derive(Debug, Clone, Copy, serde::Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Waveform {
    Sine,
    Noise,
    Spikes,
}

/// `options:` of `synthetic`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// sine (default), noise or spikes.
    #[serde(default = "default_waveform")]
    waveform: Waveform,
    /// Peak amplitude (spike depth); default 1.0 for floats, 1000 for integer dtypes.
    amplitude: Option<f64>,
    /// Sine frequency in Hz (default 10); channel c is phase-shifted by c/channels.
    #[serde(default = "default_frequency")]
    frequency: f64,
    /// Spikes per second per channel (default 20).
    #[serde(default = "default_rate")]
    rate: f64,
    /// Gaussian noise added, as a fraction of the amplitude (default 0 for sine, 1 for
    /// noise, 0.05 for spikes).
    noise: Option<f64>,
    /// Random seed (default 1): the same seed gives the same data.
    #[serde(default = "default_seed")]
    seed: u64,
}

fn default_waveform() -> Waveform {
    Waveform::Sine
}
fn default_frequency() -> f64 {
    10.0
}
fn default_rate() -> f64 {
    20.0
}
fn default_seed() -> u64 {
    1
}

/// Validate `synthetic` options: one output, any numeric dtype, a fixed (not variable)
/// signal.
pub fn check(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: Options = parse_options(options)?;
    if signals.len() != 1 {
        return Err(format!(
            "writes exactly one signal, got {} (out: [...])",
            signals.len()
        ));
    }
    if signals[0].variable {
        return Err(format!(
            "signal {:?} is variable; synthetic writes a fixed number of rows per tick",
            signals[0].name
        ));
    }
    if !(o.frequency.is_finite() && o.frequency >= 0.0) {
        return Err(format!(
            "frequency {} must be a finite number >= 0",
            o.frequency
        ));
    }
    if !(o.rate.is_finite() && o.rate >= 0.0) {
        return Err(format!("rate {} must be a finite number >= 0", o.rate));
    }
    Ok(())
}

/// Open `synthetic`.
pub fn open(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: Options = parse_options(options).map_err(DriverError::Config)?;
    let sig = signals
        .first()
        .ok_or_else(|| DriverError::Config("synthetic writes one signal".into()))?;
    let is_float = matches!(sig.dtype, DType::F32 | DType::F64);
    let amplitude = o.amplitude.unwrap_or(if is_float { 1.0 } else { 1000.0 });
    let noise = o.noise.unwrap_or(match o.waveform {
        Waveform::Sine => 0.0,
        Waveform::Noise => 1.0,
        Waveform::Spikes => 0.05,
    }) * amplitude;
    let rows = sig.rows_per_tick().max(1);
    let fs = rows as f64 / ctx.tick.as_secs_f64();
    let seed = o.seed;
    Ok(Box::new(Synthetic {
        o,
        amplitude,
        noise,
        dtype: sig.dtype,
        channels: sig.row_len(),
        fs,
        n: 0,
        rng: Rng(0x9E37_79B9_7F4A_7C15 ^ seed),
        spike_left: vec![0; sig.row_len()],
        spikes: 0,
        scratch: vec![0.0; rows * sig.row_len()],
    }))
}

/// xorshift64*: fast, deterministic, good enough for test signals.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// A 1 ms biphasic spike: a sharp trough then a slower positive lobe.
fn spike_shape(t_ms: f64) -> f64 {
    if t_ms < 0.3 {
        -(t_ms / 0.3 * std::f64::consts::PI).sin()
    } else {
        0.35 * ((t_ms - 0.3) / 0.7 * std::f64::consts::PI).sin()
    }
}

struct Synthetic {
    o: Options,
    amplitude: f64,
    noise: f64,
    dtype: DType,
    channels: usize,
    fs: f64,
    n: u64,
    rng: Rng,
    /// samples left of the spike in progress on each channel
    spike_left: Vec<u32>,
    spikes: u64,
    scratch: Vec<f64>,
}

impl Source for Synthetic {
    fn tick(&mut self, _t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        let o = &mut out[0];
        let rows = o.rows;
        let ch = self.channels;
        let spike_len = (self.fs * 1e-3).ceil().max(1.0) as u32;
        let p_spike = self.o.rate / self.fs;
        for r in 0..rows {
            let t = (self.n + r as u64) as f64 / self.fs;
            for c in 0..ch {
                let mut v = match self.o.waveform {
                    Waveform::Sine => {
                        let phase = c as f64 / ch as f64;
                        self.amplitude
                            * (2.0 * std::f64::consts::PI * (self.o.frequency * t + phase)).sin()
                    }
                    Waveform::Noise => 0.0,
                    Waveform::Spikes => {
                        if self.spike_left[c] == 0 && self.rng.uniform() < p_spike {
                            self.spike_left[c] = spike_len;
                            self.spikes += 1;
                        }
                        if self.spike_left[c] > 0 {
                            let i = spike_len - self.spike_left[c];
                            self.spike_left[c] -= 1;
                            self.amplitude * spike_shape(f64::from(i) / self.fs * 1e3)
                        } else {
                            0.0
                        }
                    }
                };
                if self.noise > 0.0 {
                    v += self.noise * self.rng.gauss();
                }
                self.scratch[r * ch + c] = v;
            }
        }
        self.n += rows as u64;
        write_values(self.dtype, &self.scratch[..rows * ch], o.bytes);
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        Ok(match self.o.waveform {
            Waveform::Spikes => format!("{} samples, {} spikes", self.n, self.spikes),
            _ => format!("{} samples", self.n),
        })
    }
}

/// Store f64 values as `dtype` (integers rounded and saturated), native byte order.
pub(crate) fn write_values(dtype: DType, vals: &[f64], out: &mut [u8]) {
    macro_rules! put {
        ($t:ty, $conv:expr) => {{
            let w = std::mem::size_of::<$t>();
            for (v, dst) in vals.iter().zip(out.chunks_exact_mut(w)) {
                let x: $t = $conv(*v);
                dst.copy_from_slice(&x.to_ne_bytes());
            }
        }};
    }
    match dtype {
        DType::F32 => put!(f32, |v: f64| v as f32),
        DType::F64 => put!(f64, |v: f64| v),
        DType::I8 => put!(i8, |v: f64| v.round() as i8),
        DType::I16 => put!(i16, |v: f64| v.round() as i16),
        DType::I32 => put!(i32, |v: f64| v.round() as i32),
        DType::I64 => put!(i64, |v: f64| v.round() as i64),
        DType::U8 => put!(u8, |v: f64| v.round() as u8),
        DType::U16 => put!(u16, |v: f64| v.round() as u16),
        DType::U32 => put!(u32, |v: f64| v.round() as u32),
        DType::U64 => put!(u64, |v: f64| v.round() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sig(shape: Vec<usize>, dtype: DType) -> Signal {
        Signal {
            name: "raw".into(),
            shape,
            dtype,
            history: 1,
            variable: false,
            channels: Vec::new(),
            units: Vec::new(),
            line: 1,
        }
    }

    fn ctx() -> DriverCtx {
        DriverCtx {
            model: "m".into(),
            tick: Duration::from_millis(1),
            out_dir: ".".into(),
            process: "gen".into(),
        }
    }

    fn run(opts: serde_json::Value, s: &Signal, ticks: usize) -> (Vec<u8>, String) {
        let mut src = open(&opts, std::slice::from_ref(s), &ctx()).unwrap();
        let per = s.rows_per_tick() * s.row_bytes();
        let mut all = Vec::new();
        for k in 0..ticks {
            let mut buf = vec![0u8; per];
            let mut out = [OutBuf {
                signal: s,
                bytes: &mut buf,
                rows: s.rows_per_tick(),
            }];
            let t = TickInfo {
                tick: k as u64,
                ..TickInfo::default()
            };
            src.tick(&t, &mut out).unwrap();
            all.extend_from_slice(&buf);
        }
        (all, src.finish().unwrap())
    }

    #[test]
    fn a_sine_has_the_asked_frequency_and_amplitude() {
        let s = sig(vec![30, 1], DType::F64);
        // 30 kHz, 10 Hz: 100 ms = one period = 100 ticks
        let (b, _) = run(
            serde_json::json!({"frequency": 10.0, "amplitude": 2.0}),
            &s,
            200,
        );
        let v: Vec<f64> = b
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(v.len(), 6000);
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        assert!((max - 2.0).abs() < 1e-3, "{max}");
        let crossings = v.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count();
        assert_eq!(
            crossings, 1,
            "one upward zero crossing between the two periods"
        );
    }

    #[test]
    fn spikes_come_at_about_the_asked_rate_and_the_same_seed_repeats() {
        let s = sig(vec![30, 32], DType::I16);
        let o = serde_json::json!({"waveform": "spikes", "rate": 50.0, "seed": 7});
        let (a, summary) = run(o.clone(), &s, 1000);
        let (b, _) = run(o, &s, 1000);
        assert_eq!(a, b, "deterministic for a seed");
        let n: u64 = summary.split(' ').nth(2).unwrap().parse().unwrap();
        // 32 channels x 50/s x 1 s = 1600 expected; Poisson: within +-20 %
        assert!((1280..=1920).contains(&n), "{summary}");
    }

    #[test]
    fn bad_options_are_refused_with_what_is_allowed() {
        let s = sig(vec![4], DType::F32);
        let e = check(&serde_json::json!({"freq": 3}), &[&s]).unwrap_err();
        assert!(
            e.contains("unknown field `freq`") && e.contains("frequency"),
            "{e}"
        );
        let e = check(&serde_json::json!({"waveform": "square"}), &[&s]).unwrap_err();
        assert!(e.contains("sine") && e.contains("spikes"), "{e}");
        let mut v = s.clone();
        v.variable = true;
        v.shape = vec![4, 2];
        assert!(check(&serde_json::json!({}), &[&v])
            .unwrap_err()
            .contains("variable"));
        assert!(check(&serde_json::json!({}), &[&s, &s])
            .unwrap_err()
            .contains("exactly one"));
    }
}
