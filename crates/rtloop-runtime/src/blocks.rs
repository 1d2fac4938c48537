//! Blocks: rtloop-dsp's signal-processing blocks as modules of a model (`block: NAME` and
//! `options:` in `modules:`). Each block reads one float32 or float64 signal, a tick's rows
//! being its samples and a row's values its channels, keeps its state from tick to tick, and
//! writes one signal: the filtered samples (filters, re-referencing, the envelope), every
//! `factor`-th of them (decimation), or its events (spikes, ripples, phase triggers) as the
//! rows of a `variable` float64 signal of 3 values per row, `[channel, sample, value]`.
//!
//! A block is a line in [`BLOCKS`]: its name, its options and how its options become a
//! [`Spec`]. The same code checks a model's options when it loads and opens the block in its
//! process, so a model that loads opens. Every buffer a block needs is made when it opens:
//! nothing is allocated in a tick.

use std::time::Duration;

use num_traits::Float;
use rtloop_dsp as dsp;
use rtloop_stream::DType;
use serde_json::{Map, Value};

use crate::drivers::{InView, OutBuf, TickInfo};
use crate::model::Signal;
use crate::process::{Step, StepError};

/// How long a block's output lags its input.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Delay {
    /// In samples of the block's input (fractional for a filter's group delay).
    pub samples: f64,
    /// In milliseconds.
    pub ms: f64,
}

/// Where a block's problem is in the model file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The `block:` line.
    Block,
    /// An option's line (the `block:` line if the option is not given).
    Option(&'static str),
    /// An option the block does not take: its line.
    Unknown(String),
    /// The `in:` signal.
    Input,
    /// The `out:` signal.
    Output,
}

/// A block's options or signals that it cannot work with: where, and what is wrong and
/// what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockError {
    /// Where in the model.
    pub at: At,
    /// What is wrong, and what is allowed.
    pub message: String,
}

impl BlockError {
    fn new(at: At, message: impl Into<String>) -> Self {
        BlockError {
            at,
            message: message.into(),
        }
    }
    fn option(key: &'static str, message: impl Into<String>) -> Self {
        Self::new(At::Option(key), message)
    }
}

impl std::fmt::Display for BlockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a block's output signal must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// The input's rows per tick, channels and dtype.
    Same,
    /// The input's channels and dtype, rows per tick divided by the factor.
    Decimated,
    /// Events: a `variable` float64 signal of 3 values per row.
    Events,
}

/// One built-in block: its name in a model file, its options and how they become a [`Spec`].
pub struct Block {
    /// `block:` in the model file.
    pub name: &'static str,
    /// The options it takes (`options:`).
    pub options: &'static [&'static str],
    /// What its output signal is.
    pub output: Output,
    spec: SpecFn,
}

type SpecFn = fn(&Opts<'_>, &Ports<'_>) -> Result<Spec, BlockError>;

/// Every block built into this rtloop: one line each, the only place a block is named.
pub const BLOCKS: &[Block] = &[
    Block {
        name: "lowpass",
        options: &["cutoff", "order"],
        output: Output::Same,
        spec: lowpass,
    },
    Block {
        name: "highpass",
        options: &["cutoff", "order"],
        output: Output::Same,
        spec: highpass,
    },
    Block {
        name: "bandpass",
        options: &["low", "high", "order"],
        output: Output::Same,
        spec: bandpass,
    },
    Block {
        name: "notch",
        options: &["freq", "q"],
        output: Output::Same,
        spec: notch,
    },
    Block {
        name: "reref",
        options: &["reference", "channels"],
        output: Output::Same,
        spec: reref,
    },
    Block {
        name: "envelope",
        options: &["window"],
        output: Output::Same,
        spec: envelope,
    },
    Block {
        name: "decimate",
        options: &["factor"],
        output: Output::Decimated,
        spec: decimate,
    },
    Block {
        name: "spikes",
        options: &["k", "sign", "refractory", "peak_window", "noise_window"],
        output: Output::Events,
        spec: spikes,
    },
    Block {
        name: "ripples",
        options: &[
            "band",
            "order",
            "rms_window",
            "z_start",
            "z_end",
            "min_duration",
            "baseline",
            "warmup",
        ],
        output: Output::Events,
        spec: ripples,
    },
    Block {
        name: "phase",
        options: &["band", "window", "target", "min_amplitude", "refractory"],
        output: Output::Events,
        spec: phase,
    },
];

/// The built-in block named `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Block> {
    BLOCKS.iter().find(|b| b.name == name)
}

/// The names of every block, for messages.
#[must_use]
pub fn block_names() -> String {
    BLOCKS.iter().map(|b| b.name).collect::<Vec<_>>().join(", ")
}

/// A block's signals and the model's tick.
#[derive(Clone, Copy)]
pub struct Ports<'a> {
    /// The signal it reads.
    pub input: &'a Signal,
    /// The signal it writes.
    pub output: &'a Signal,
    /// The model's tick.
    pub tick: Duration,
}

impl Ports<'_> {
    /// The input's sample rate, Hz: its rows per tick over the tick.
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.input.rows_per_tick() as f64 / self.tick.as_secs_f64()
    }
    fn channels(&self) -> usize {
        self.input.row_len()
    }
    /// `seconds` of input samples, at least `min`.
    fn samples(&self, seconds: f64, min: usize) -> usize {
        ((self.rate() * seconds).round() as usize).max(min)
    }
}

/// What a block runs, with its settings checked by its option parser; made into the block's
/// rtloop-dsp object when it opens.
#[derive(Debug, Clone)]
pub enum Spec {
    /// A filter of second-order sections, with its group delay (samples).
    Sos {
        /// The sections.
        sections: Vec<dsp::Section>,
        /// Its group delay in samples.
        delay: f64,
    },
    /// Re-referencing.
    Reref {
        /// The reference channels (`None`: all).
        channels: Option<Vec<usize>>,
        /// Average or median.
        reference: dsp::Reference,
    },
    /// The moving RMS over `window` samples.
    Envelope {
        /// Samples.
        window: usize,
    },
    /// Decimation by `factor`.
    Decimate {
        /// Keep one sample in this many.
        factor: usize,
    },
    /// Spike detection.
    Spikes(dsp::SpikeConfig),
    /// Ripple detection.
    Ripples(dsp::RippleConfig),
    /// Phase triggers.
    Phase(dsp::PhaseConfig),
}

/// Check a block's options against its signals (the model's validation): the block opens
/// with them.
///
/// # Errors
/// Every problem found (the input, the output, the options): what is wrong, where in the
/// model, and what is allowed.
pub fn check(name: &str, options: &Value, ports: &Ports<'_>) -> Result<Delay, Vec<BlockError>> {
    let (block, spec) = spec(name, options, ports)?;
    Ok(match ports.input.dtype {
        DType::F32 => {
            make::<f32>(block, spec, ports, true)
                .map_err(|e| vec![e])?
                .delay
        }
        _ => {
            make::<f64>(block, spec, ports, true)
                .map_err(|e| vec![e])?
                .delay
        }
    })
}

/// Open a block (its options were [`check`]ed) as the step of its process.
///
/// # Errors
/// As [`check`].
pub fn open(
    name: &str,
    options: &Value,
    ports: &Ports<'_>,
) -> Result<Box<dyn Step>, Vec<BlockError>> {
    let (block, spec) = spec(name, options, ports)?;
    let one = |e| vec![e];
    Ok(match ports.input.dtype {
        DType::F32 => Box::new(make::<f32>(block, spec, ports, false).map_err(one)?),
        _ => Box::new(make::<f64>(block, spec, ports, false).map_err(one)?),
    })
}

/// The block and its settings; every problem of its signals and of its options.
fn spec(
    name: &str,
    options: &Value,
    ports: &Ports<'_>,
) -> Result<(&'static Block, Spec), Vec<BlockError>> {
    let block = find(name).ok_or_else(|| {
        vec![BlockError::new(
            At::Block,
            format!("unknown block {name:?}; blocks: {}", block_names()),
        )]
    })?;
    let mut errors = signals(block, ports);
    let spec = Opts::new(block, options)
        .and_then(|o| (block.spec)(&o, ports))
        .and_then(|spec| decimation(&spec, ports).map(|()| spec));
    match spec {
        Ok(spec) if errors.is_empty() => Ok((block, spec)),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.push(e);
            Err(errors)
        }
    }
}

/// A decimation's factor and output against the input's rows per tick.
fn decimation(spec: &Spec, ports: &Ports<'_>) -> Result<(), BlockError> {
    if let Spec::Decimate { factor } = *spec {
        let rows = ports.input.rows_per_tick();
        if rows % factor != 0 {
            let divisors: Vec<String> = (2..=rows)
                .filter(|d| rows % d == 0)
                .map(|d| d.to_string())
                .collect();
            return Err(BlockError::option(
                "factor",
                format!(
                    "factor {factor} does not divide the {rows} rows per tick of '{}': each \
                     tick must keep whole samples; factors that do: {}",
                    ports.input.name,
                    if divisors.is_empty() {
                        "none (give the signal more rows per tick)".to_owned()
                    } else {
                        divisors.join(", ")
                    }
                ),
            ));
        }
        let want = rows / factor;
        let out = ports.output;
        if out.rows_per_tick() != want {
            return Err(BlockError::new(
                At::Output,
                format!(
                    "writes '{}' with {} rows per tick; decimating {rows} rows by {factor} \
                     keeps {want}: give it shape [{want}, {}]",
                    out.name,
                    out.rows_per_tick(),
                    ports.channels()
                ),
            ));
        }
    }
    Ok(())
}

/// Problems of the input and of the output signal (at most one each; a filter's output is
/// compared with its input only when that is right).
fn signals(block: &Block, p: &Ports<'_>) -> Vec<BlockError> {
    match input(p) {
        Err(e) if block.output != Output::Events => vec![e],
        i => [i, output(block, p)]
            .into_iter()
            .filter_map(Result::err)
            .collect(),
    }
}

/// The input a block can work with.
fn input(p: &Ports<'_>) -> Result<(), BlockError> {
    let i = p.input;
    if !matches!(i.dtype, DType::F32 | DType::F64) {
        return Err(BlockError::new(
            At::Input,
            format!(
                "reads '{}' of dtype {}; a block reads float32 or float64 signals",
                i.name, i.dtype
            ),
        ));
    }
    if i.variable {
        return Err(BlockError::new(
            At::Input,
            format!(
                "reads '{}', a variable signal; a block reads a fixed number of samples per \
                 tick (a signal without 'variable: true')",
                i.name
            ),
        ));
    }
    Ok(())
}

/// The output a block writes.
fn output(block: &Block, p: &Ports<'_>) -> Result<(), BlockError> {
    let (i, o) = (p.input, p.output);
    match block.output {
        Output::Same | Output::Decimated => {
            if o.variable || o.dtype != i.dtype || o.row_len() != i.row_len() {
                return Err(BlockError::new(
                    At::Output,
                    format!(
                        "writes '{}' ({} values per row of {}{}); block '{}' writes what it \
                         reads: {} values per row of {}, not variable",
                        o.name,
                        o.row_len(),
                        o.dtype,
                        if o.variable { ", variable" } else { "" },
                        block.name,
                        i.row_len(),
                        i.dtype
                    ),
                ));
            }
            if block.output == Output::Same && o.rows_per_tick() != i.rows_per_tick() {
                return Err(BlockError::new(
                    At::Output,
                    format!(
                        "writes '{}' with {} rows per tick; block '{}' writes as many rows as \
                         it reads ({} per tick of '{}')",
                        o.name,
                        o.rows_per_tick(),
                        block.name,
                        i.rows_per_tick(),
                        i.name
                    ),
                ));
            }
        }
        Output::Events => {
            if !o.variable || o.dtype != DType::F64 || o.row_len() != 3 {
                return Err(BlockError::new(
                    At::Output,
                    format!(
                        "writes '{}' ({} values per row of {}{}); block '{}' writes events: a \
                         variable float64 signal of 3 values per row [channel, sample, value], \
                         e.g. {{shape: [64, 3], dtype: float64, variable: true}}",
                        o.name,
                        o.row_len(),
                        o.dtype,
                        if o.variable {
                            ", variable"
                        } else {
                            ", not variable"
                        },
                        block.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A block's `options:`, read key by key; unknown keys are refused when it is made.
struct Opts<'a> {
    block: &'static str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Opts<'a> {
    fn new(block: &'static Block, v: &'a Value) -> Result<Self, BlockError> {
        let map = match v {
            Value::Null => None,
            Value::Object(m) => Some(m),
            _ => {
                return Err(BlockError::new(
                    At::Block,
                    format!(
                        "options: expected a mapping of option name to value; block '{}' takes {}",
                        block.name,
                        block.options.join(", ")
                    ),
                ))
            }
        };
        for k in map.into_iter().flat_map(Map::keys) {
            if !block.options.contains(&k.as_str()) {
                return Err(BlockError::new(
                    At::Unknown(k.clone()),
                    format!(
                        "options: unknown option '{k}'; block '{}' takes {}",
                        block.name,
                        block.options.join(", ")
                    ),
                ));
            }
        }
        Ok(Opts {
            block: block.name,
            map,
        })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    fn missing(&self, key: &'static str, what: &str) -> BlockError {
        BlockError::new(
            At::Block,
            format!(
                "options: missing option '{key}' ({what}); block '{}' needs it",
                self.block
            ),
        )
    }

    /// A finite number satisfying `ok` (`expected` says which).
    fn num(
        &self,
        key: &'static str,
        default: Option<f64>,
        what: &str,
        expected: &str,
        ok: impl Fn(f64) -> bool,
    ) -> Result<f64, BlockError> {
        let Some(v) = self.get(key) else {
            return default.ok_or_else(|| self.missing(key, what));
        };
        match v.as_f64() {
            Some(x) if x.is_finite() && ok(x) => Ok(x),
            _ => Err(BlockError::option(
                key,
                format!("{key}: {v} is not allowed; give {expected}"),
            )),
        }
    }

    /// A whole number >= `min`.
    fn count(
        &self,
        key: &'static str,
        default: Option<usize>,
        what: &str,
        min: usize,
    ) -> Result<usize, BlockError> {
        let Some(v) = self.get(key) else {
            return default.ok_or_else(|| self.missing(key, what));
        };
        match v.as_u64().and_then(|x| usize::try_from(x).ok()) {
            Some(x) if x >= min => Ok(x),
            _ => Err(BlockError::option(
                key,
                format!("{key}: {v} is not allowed; give a whole number >= {min} ({what})"),
            )),
        }
    }

    /// One of `choices`.
    fn choice(
        &self,
        key: &'static str,
        choices: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str, BlockError> {
        let Some(v) = self.get(key) else {
            return Ok(default);
        };
        v.as_str()
            .and_then(|s| choices.iter().find(|c| **c == s).copied())
            .ok_or_else(|| {
                BlockError::option(
                    key,
                    format!(
                        "{key}: {v} is not allowed; give one of {}",
                        choices.join(", ")
                    ),
                )
            })
    }

    /// `[low, high]` in Hz.
    fn band(
        &self,
        key: &'static str,
        default: Option<(f64, f64)>,
    ) -> Result<(f64, f64), BlockError> {
        let Some(v) = self.get(key) else {
            return default.ok_or_else(|| self.missing(key, "[low, high] in Hz"));
        };
        match v.as_array().map(Vec::as_slice) {
            Some([lo, hi]) => match (lo.as_f64(), hi.as_f64()) {
                (Some(lo), Some(hi)) if lo.is_finite() && hi.is_finite() => Ok((lo, hi)),
                _ => Err(BlockError::option(
                    key,
                    format!("{key}: {v} is not allowed; give [low, high] in Hz, two numbers"),
                )),
            },
            _ => Err(BlockError::option(
                key,
                format!("{key}: {v} is not allowed; give [low, high] in Hz, two numbers"),
            )),
        }
    }

    /// A list of channel indices.
    fn indices(&self, key: &'static str) -> Result<Option<Vec<usize>>, BlockError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let bad = || {
            BlockError::option(
                key,
                format!("{key}: {v} is not allowed; give a list of channel indices (0, 1, ...)"),
            )
        };
        v.as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|x| x.as_u64().and_then(|x| usize::try_from(x).ok()))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(bad)
    }
}

/// A Butterworth order option (default 4).
fn order(o: &Opts<'_>) -> Result<usize, BlockError> {
    o.count("order", Some(4), "the Butterworth order, 1 to 12", 1)
}

/// Design a filter, naming the option a design error is about.
fn design(band: dsp::Band, order: usize, rate: f64) -> Result<Vec<dsp::Section>, BlockError> {
    dsp::design(band, order, rate).map_err(|e| {
        let at = match &e {
            dsp::DesignError::Frequency { what, .. } => match *what {
                "low edge" => At::Option("low"),
                "high edge" => At::Option("high"),
                "notch frequency" => At::Option("freq"),
                _ => At::Option("cutoff"),
            },
            dsp::DesignError::Edges { .. } => At::Option("low"),
            dsp::DesignError::Order { .. } => At::Option("order"),
            dsp::DesignError::Quality(_) => At::Option("q"),
            dsp::DesignError::Rate(_) | dsp::DesignError::Shape(_) => At::Block,
        };
        BlockError::new(at, e.to_string())
    })
}

fn hz(o: &Opts<'_>, key: &'static str, what: &str) -> Result<f64, BlockError> {
    o.num(key, None, what, "a frequency in Hz > 0", |x| x > 0.0)
}

fn lowpass(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let cutoff = hz(o, "cutoff", "the -3 dB frequency in Hz")?;
    let sections = design(dsp::Band::Lowpass { cutoff }, order(o)?, p.rate())?;
    // its delay where it passes: at 0 Hz
    let delay = dsp::group_delay(&sections, 0.0, p.rate());
    Ok(Spec::Sos { sections, delay })
}

fn highpass(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let cutoff = hz(o, "cutoff", "the -3 dB frequency in Hz")?;
    let sections = design(dsp::Band::Highpass { cutoff }, order(o)?, p.rate())?;
    // at the middle (geometric) of what it passes, cutoff to Nyquist
    let delay = dsp::group_delay(&sections, (cutoff * p.rate() / 2.0).sqrt(), p.rate());
    Ok(Spec::Sos { sections, delay })
}

fn bandpass(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let low = hz(o, "low", "the lower -3 dB frequency in Hz")?;
    let high = hz(o, "high", "the upper -3 dB frequency in Hz")?;
    let sections = design(dsp::Band::Bandpass { low, high }, order(o)?, p.rate())?;
    // at the band's centre, as the ripple detector states its own
    let delay = dsp::group_delay(&sections, (low * high).sqrt(), p.rate());
    Ok(Spec::Sos { sections, delay })
}

fn notch(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let freq = hz(o, "freq", "the frequency removed, Hz")?;
    let q = o.num(
        "q",
        Some(30.0),
        "the quality factor",
        "a quality factor > 0 (the notch is freq / q wide)",
        |x| x > 0.0,
    )?;
    let sections = design(dsp::Band::Notch { freq, q }, 2, p.rate())?;
    let delay = dsp::group_delay(&sections, 0.0, p.rate());
    Ok(Spec::Sos { sections, delay })
}

fn reref(o: &Opts<'_>, _: &Ports<'_>) -> Result<Spec, BlockError> {
    let reference = match o.choice("reference", &["average", "median"], "average")? {
        "median" => dsp::Reference::Median,
        _ => dsp::Reference::Average,
    };
    Ok(Spec::Reref {
        channels: o.indices("channels")?,
        reference,
    })
}

fn envelope(o: &Opts<'_>, _: &Ports<'_>) -> Result<Spec, BlockError> {
    Ok(Spec::Envelope {
        window: o.count("window", None, "the RMS window in samples", 1)?,
    })
}

fn decimate(o: &Opts<'_>, _: &Ports<'_>) -> Result<Spec, BlockError> {
    Ok(Spec::Decimate {
        factor: o.count("factor", None, "keep one sample in this many", 2)?,
    })
}

fn spikes(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let sign = match o.choice("sign", &["negative", "positive", "both"], "negative")? {
        "positive" => dsp::Sign::Positive,
        "both" => dsp::Sign::Both,
        _ => dsp::Sign::Negative,
    };
    Ok(Spec::Spikes(dsp::SpikeConfig {
        channels: p.channels(),
        k: o.num(
            "k",
            Some(5.0),
            "the threshold in noise sigmas",
            "a threshold in noise sigmas > 0 (typically 4 to 6)",
            |x| x > 0.0,
        )?,
        sign,
        refractory: o.count(
            "refractory",
            Some(p.samples(1e-3, 0)),
            "samples after a spike with none on its channel",
            0,
        )?,
        peak_window: o.count(
            "peak_window",
            Some(p.samples(0.5e-3, 1)),
            "samples after a crossing its peak is looked for in",
            1,
        )?,
        noise_window: o.count(
            "noise_window",
            Some(p.samples(1.0, 1)),
            "samples of each noise estimate",
            1,
        )?,
    }))
}

fn ripples(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let u = dsp::RippleConfig::usual(p.channels(), p.rate());
    let z = "a finite z-score";
    Ok(Spec::Ripples(dsp::RippleConfig {
        band: o.band("band", Some(u.band))?,
        order: o.count("order", Some(u.order), "the band-pass's order, 1 to 12", 1)?,
        rms_window: o.count(
            "rms_window",
            Some(u.rms_window),
            "the envelope's window in samples",
            1,
        )?,
        z_start: o.num("z_start", Some(u.z_start), z, z, |_| true)?,
        z_end: o.num("z_end", Some(u.z_end), z, z, |_| true)?,
        min_duration: o.count(
            "min_duration",
            Some(u.min_duration),
            "samples above z_start before a ripple is reported",
            1,
        )?,
        baseline: o.num(
            "baseline",
            Some(u.baseline),
            "the baseline's time constant",
            "the baseline's time constant in samples, >= 1",
            |x| x >= 1.0,
        )?,
        warmup: o.count(
            "warmup",
            usize::try_from(u.warmup).ok(),
            "samples before the first detection",
            0,
        )? as u64,
        ..u
    }))
}

fn phase(o: &Opts<'_>, p: &Ports<'_>) -> Result<Spec, BlockError> {
    let band = o.band("band", None)?;
    // at least one cycle of the band's low edge, and half a second
    let one_cycle = if band.0 > 0.0 {
        (p.rate() / band.0).ceil() as usize
    } else {
        1
    };
    Ok(Spec::Phase(dsp::PhaseConfig {
        channels: p.channels(),
        rate: p.rate(),
        band,
        window: o.count(
            "window",
            Some(one_cycle.max(p.samples(0.5, 1))),
            "samples of each estimate",
            1,
        )?,
        target: o.num(
            "target",
            Some(0.0),
            "the target phase",
            "a phase in radians (0: the peak, -1.5708: the rising zero crossing)",
            |_| true,
        )?,
        min_amplitude: o.num(
            "min_amplitude",
            Some(0.0),
            "the smallest amplitude",
            "an amplitude >= 0",
            |x| x >= 0.0,
        )?,
        refractory: o.count(
            "refractory",
            Some(0),
            "samples after a trigger with none on its channel",
            0,
        )?,
    }))
}

/// A value type a block runs on (a signal's float32 or float64).
trait Sample: Float + Send + 'static {
    const SIZE: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, b: &mut [u8]);
}

impl Sample for f32 {
    const SIZE: usize = 4;
    fn get(b: &[u8]) -> Self {
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
    fn put(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_ne_bytes());
    }
}

impl Sample for f64 {
    const SIZE: usize = 8;
    fn get(b: &[u8]) -> Self {
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        f64::from_ne_bytes(a)
    }
    fn put(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_ne_bytes());
    }
}

/// A block's rtloop-dsp object.
enum Run<T> {
    Sos(dsp::SosFilter<T>),
    Reref(dsp::Reref<T>),
    Envelope(dsp::MovingRms<T>),
    /// The decimator and its output's values for a tick.
    Decimate(dsp::Decimator<T>, Vec<T>),
    Spikes(dsp::SpikeDetector<T>),
    Ripples(dsp::RippleDetector),
    Phase(dsp::PhaseTracker),
}

/// A block as its process's step.
struct BlockStep<T> {
    name: &'static str,
    run: Run<T>,
    /// Input rows per tick and values per row.
    rows: usize,
    channels: usize,
    /// This tick's input values (the block works on its own copy: a module's input is the
    /// stream's memory, which a block must not change).
    buf: Vec<T>,
    /// This tick's events, `[channel, sample, value]`; never more than the output's rows.
    events: Vec<[f64; 3]>,
    /// The output's rows per tick (events a tick can carry).
    event_rows: usize,
    /// Input samples the block has seen.
    seen: u64,
    /// Events written, and events a full tick had no room for.
    emitted: u64,
    dropped: u64,
    delay: Delay,
}

/// Make the block's step; `checking`: only to see that it can be made (every process of a
/// model checks every block when it loads the model).
fn make<T: Sample>(
    block: &Block,
    spec: Spec,
    p: &Ports<'_>,
    checking: bool,
) -> Result<BlockStep<T>, BlockError> {
    let ch = p.channels();
    let rows = p.input.rows_per_tick();
    let rate = p.rate();
    let whole = |e: String| BlockError::new(At::Block, e);
    let (run, samples) = match spec {
        Spec::Sos { sections, delay } => (
            Run::Sos(dsp::SosFilter::new(&sections, ch).map_err(|e| whole(e.to_string()))?),
            delay,
        ),
        Spec::Reref {
            channels,
            reference,
        } => (
            Run::Reref(
                dsp::Reref::new(ch, channels.as_deref(), reference)
                    .map_err(|e| BlockError::option("channels", e.to_string()))?,
            ),
            0.0,
        ),
        Spec::Envelope { window } => {
            let m = dsp::MovingRms::new(ch, window)
                .map_err(|e| BlockError::option("window", e.to_string()))?;
            let d = m.delay_samples();
            (Run::Envelope(m), d)
        }
        Spec::Decimate { factor } => {
            let d = dsp::Decimator::new(ch, factor)
                .map_err(|e| BlockError::option("factor", e.to_string()))?;
            let delay = d.delay_samples();
            (Run::Decimate(d, vec![T::zero(); rows / factor * ch]), delay)
        }
        Spec::Spikes(cfg) => {
            let d = dsp::SpikeDetector::new(cfg).map_err(|e| {
                let at = match e {
                    dsp::SpikeError::Threshold(_) => At::Option("k"),
                    dsp::SpikeError::Window("the peak window") => At::Option("peak_window"),
                    dsp::SpikeError::Window(_) => At::Option("noise_window"),
                    _ => At::Block,
                };
                BlockError::new(at, e.to_string())
            })?;
            let delay = d.delay_samples() as f64;
            (Run::Spikes(d), delay)
        }
        Spec::Ripples(cfg) => {
            let mut d = dsp::RippleDetector::new(cfg).map_err(|e| {
                let at = match e {
                    dsp::RippleError::Design(dsp::DesignError::Order { .. }) => At::Option("order"),
                    dsp::RippleError::Design(_) => At::Option("band"),
                    dsp::RippleError::Thresholds { .. } => At::Option("z_end"),
                    _ => At::Block,
                };
                BlockError::new(at, e.to_string())
            })?;
            d.reserve(rows);
            let delay = d.delay_samples();
            (Run::Ripples(d), delay)
        }
        Spec::Phase(mut cfg) => {
            if checking && cfg.band.0.is_finite() && cfg.band.0 > 0.0 {
                // its kernel takes window² steps to make: a check makes the shortest window
                // the tracker takes (one cycle of the low edge), which it refuses alike
                let need = (cfg.rate / cfg.band.0).ceil() as usize;
                cfg.window = cfg.window.min(need.max(1));
            }
            let d = dsp::PhaseTracker::new(cfg).map_err(|e| {
                let at = match e {
                    dsp::PhaseError::Design(_) | dsp::PhaseError::TooHigh { .. } => {
                        At::Option("band")
                    }
                    dsp::PhaseError::Window { .. } => At::Option("window"),
                    _ => At::Block,
                };
                BlockError::new(at, e.to_string())
            })?;
            // the phase is of the newest sample: no delay by construction
            (Run::Phase(d), 0.0)
        }
    };
    let event_rows = if block.output == Output::Events {
        p.output.rows_per_tick()
    } else {
        0
    };
    Ok(BlockStep {
        name: block.name,
        run,
        rows,
        channels: ch,
        buf: vec![T::zero(); rows * ch],
        events: Vec::with_capacity(event_rows),
        event_rows,
        seen: 0,
        emitted: 0,
        dropped: 0,
        delay: Delay {
            samples,
            ms: samples / rate * 1e3,
        },
    })
}

/// Why a block could not run a tick. None of these happens in a model that loaded: its
/// signals were checked against the block.
#[derive(Debug, thiserror::Error)]
pub enum BlockTickError {
    /// It was not given one input and one output.
    #[error(
        "block '{block}' reads one signal and writes one; it was given {inputs} and {outputs}"
    )]
    Ports {
        /// The block.
        block: &'static str,
        /// Inputs given.
        inputs: usize,
        /// Outputs given.
        outputs: usize,
    },
    /// The input holds less than one tick of samples.
    #[error(
        "block '{block}': '{signal}' holds {bytes} bytes this tick, fewer than one tick's {needed}"
    )]
    Short {
        /// The block.
        block: &'static str,
        /// The input signal.
        signal: String,
        /// Bytes it holds.
        bytes: usize,
        /// Bytes of one tick.
        needed: usize,
    },
    /// The rtloop-dsp block refused the tick's chunk.
    #[error("block '{block}': {source}")]
    Dsp {
        /// The block.
        block: &'static str,
        /// rtloop-dsp's error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// rtloop-dsp's error for block `block`, as a step's.
fn dsp_error<E: std::error::Error + Send + Sync + 'static>(
    block: &'static str,
) -> impl FnOnce(E) -> StepError {
    move |e| {
        StepError::Block(BlockTickError::Dsp {
            block,
            source: Box::new(e),
        })
    }
}

/// Write `vals` into `bytes` as native values.
fn store<T: Sample>(vals: &[T], bytes: &mut [u8]) {
    for (v, b) in vals.iter().zip(bytes.chunks_exact_mut(T::SIZE)) {
        v.put(b);
    }
}

impl<T: Sample> Step for BlockStep<T> {
    fn step(
        &mut self,
        _: &TickInfo,
        inputs: &[InView<'_>],
        outputs: &mut [OutBuf<'_>],
    ) -> Result<(), StepError> {
        let (Some(inp), Some(out)) = (inputs.first(), outputs.first_mut()) else {
            return Err(StepError::Block(BlockTickError::Ports {
                block: self.name,
                inputs: inputs.len(),
                outputs: outputs.len(),
            }));
        };
        // the view holds the signal's history, oldest first: this tick's rows are the last
        let n = self.rows * self.channels * T::SIZE;
        let Some(start) = inp.bytes.len().checked_sub(n) else {
            return Err(StepError::Block(BlockTickError::Short {
                block: self.name,
                signal: inp.signal.name.clone(),
                bytes: inp.bytes.len(),
                needed: n,
            }));
        };
        for (v, b) in self
            .buf
            .iter_mut()
            .zip(inp.bytes[start..].chunks_exact(T::SIZE))
        {
            *v = T::get(b);
        }
        // the stream index of the block's sample 0 (a lost tick's rows were never seen)
        let first = inp.first + (inp.rows - self.rows) as u64;
        let base = first.wrapping_sub(self.seen);
        self.seen += self.rows as u64;
        self.events.clear();
        let (events, cap, dropped) = (&mut self.events, self.event_rows, &mut self.dropped);
        let mut emit = |channel: usize, sample: u64, value: f64| {
            if events.len() < cap {
                events.push([channel as f64, base.wrapping_add(sample) as f64, value]);
            } else {
                *dropped += 1;
            }
        };
        let name = self.name;
        match &mut self.run {
            Run::Sos(f) => f.process(&mut self.buf).map_err(dsp_error(name))?,
            Run::Reref(r) => r.process(&mut self.buf).map_err(dsp_error(name))?,
            Run::Envelope(m) => m.process(&mut self.buf).map_err(dsp_error(name))?,
            Run::Decimate(d, kept) => {
                d.process(&mut self.buf, kept).map_err(dsp_error(name))?;
                store(kept, out.bytes);
                return Ok(());
            }
            Run::Spikes(d) => d
                .process(&self.buf, |s| {
                    emit(s.channel, s.sample, s.peak.to_f64().unwrap_or(f64::NAN));
                })
                .map_err(dsp_error(name))?,
            Run::Ripples(d) => d
                .process(&self.buf, |r| {
                    emit(r.channel, r.detected, base.wrapping_add(r.onset) as f64);
                })
                .map_err(dsp_error(name))?,
            Run::Phase(d) => d
                .process(&self.buf, |t| emit(t.channel, t.sample, t.phase))
                .map_err(dsp_error(name))?,
        }
        if self.event_rows > 0 {
            for (row, e) in out.bytes.chunks_exact_mut(24).zip(&self.events) {
                store(e, row);
            }
            out.rows = self.events.len();
            self.emitted += self.events.len() as u64;
        } else {
            store(&self.buf, out.bytes);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, StepError> {
        let d = self.delay;
        let mut s = format!(
            "{}: delay {:.2} samples ({:.3} ms)",
            self.name, d.samples, d.ms
        );
        if self.event_rows > 0 {
            s.push_str(&format!("; {} events", self.emitted));
            if self.dropped > 0 {
                s.push_str(&format!(
                    ", {} dropped (more than {} in a tick: give the output more rows)",
                    self.dropped, self.event_rows
                ));
            }
        }
        Ok(s)
    }

    fn delay(&self) -> Option<Delay> {
        Some(self.delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sig(name: &str, shape: &[usize], dtype: DType, history: u64, variable: bool) -> Signal {
        Signal {
            name: name.into(),
            shape: shape.to_vec(),
            dtype,
            history,
            variable,
            channels: Vec::new(),
            units: Vec::new(),
            line: 1,
        }
    }

    const TICK: Duration = Duration::from_millis(1);

    /// Run `step` over `x` (sample-major, `ch` channels) tick by tick as the process loop
    /// gives it: each view holds `history` ticks, the oldest first; the stream starts with
    /// `history` ticks of zeros (written at start), so tick `k`'s view starts at stream
    /// index `(k + 1) * rows` and `x`'s sample `i` is the stream's `i + history * rows`.
    /// Returns every tick's output rows' bytes and row counts.
    fn run(
        step: &mut dyn Step,
        input: &Signal,
        output: &Signal,
        x: &[f64],
    ) -> Vec<(Vec<u8>, usize)> {
        let (rows, ch, h) = (
            input.rows_per_tick(),
            input.row_len(),
            input.history as usize,
        );
        let size = input.dtype.itemsize();
        let mut stream: Vec<u8> = vec![0; h * rows * ch * size];
        let mut outs = Vec::new();
        for (k, chunk) in x.chunks_exact(rows * ch).enumerate() {
            for v in chunk {
                match input.dtype {
                    DType::F32 => stream.extend_from_slice(&(*v as f32).to_ne_bytes()),
                    _ => stream.extend_from_slice(&v.to_ne_bytes()),
                }
            }
            let end = stream.len();
            let view = &stream[end - h * rows * ch * size..];
            let inputs = [InView {
                signal: input,
                bytes: view,
                rows: h * rows,
                first: ((k + 1) * rows) as u64,
            }];
            let mut buf = vec![0xAAu8; output.rows_per_tick() * output.row_bytes()];
            let mut outputs = [OutBuf {
                signal: output,
                bytes: &mut buf,
                rows: output.rows_per_tick(),
            }];
            step.step(&TickInfo::default(), &inputs, &mut outputs)
                .unwrap();
            let n = outputs[0].rows;
            outs.push((buf, n));
        }
        outs
    }

    fn f32s(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }
    fn f64s(b: &[u8]) -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// A deterministic test signal: two sines and a ramp per channel.
    fn signal(n: usize, ch: usize) -> Vec<f64> {
        (0..n * ch)
            .map(|i| {
                let (t, c) = ((i / ch) as f64, (i % ch) as f64);
                (t * 0.05 + c).sin() + 0.3 * (t * 0.9).cos() + 1e-3 * t
            })
            .collect()
    }

    #[test]
    fn a_filter_block_over_ticks_is_the_filter_over_the_whole_signal() {
        let input = sig("raw", &[30, 3], DType::F32, 4, false);
        let output = sig("y", &[30, 3], DType::F32, 1, false);
        let opts = json!({"low": 300, "high": 3000, "order": 3});
        let ports = Ports {
            input: &input,
            output: &output,
            tick: TICK,
        };
        let mut step = open("bandpass", &opts, &ports).unwrap();
        let x = signal(30 * 50, 3);
        let got: Vec<f32> = run(step.as_mut(), &input, &output, &x)
            .iter()
            .flat_map(|(b, n)| {
                assert_eq!(*n, 30);
                f32s(b)
            })
            .collect();
        let sections = dsp::design(
            dsp::Band::Bandpass {
                low: 300.0,
                high: 3000.0,
            },
            3,
            30_000.0,
        )
        .unwrap();
        let mut want: Vec<f32> = x.iter().map(|v| *v as f32).collect();
        dsp::SosFilter::<f32>::new(&sections, 3)
            .unwrap()
            .process(&mut want)
            .unwrap();
        assert_eq!(got, want);
        let d = step.delay().unwrap();
        let gd = dsp::group_delay(&sections, (300.0f64 * 3000.0).sqrt(), 30_000.0);
        assert_eq!(d.samples, gd);
        assert!((d.ms - gd / 30.0).abs() < 1e-12, "{d:?}");
        assert!(step.finish().unwrap().starts_with("bandpass: delay "));
    }

    #[test]
    fn decimation_writes_every_factorth_filtered_sample() {
        let input = sig("raw", &[30, 2], DType::F64, 1, false);
        let output = sig("y", &[10, 2], DType::F64, 1, false);
        let ports = Ports {
            input: &input,
            output: &output,
            tick: TICK,
        };
        let mut step = open("decimate", &json!({"factor": 3}), &ports).unwrap();
        let x = signal(30 * 20, 2);
        let got: Vec<f64> = run(step.as_mut(), &input, &output, &x)
            .iter()
            .flat_map(|(b, _)| f64s(b))
            .collect();
        let mut d = dsp::Decimator::<f64>::new(2, 3).unwrap();
        let mut all = x.clone();
        let mut want = vec![0.0; 200 * 2];
        d.process(&mut all, &mut want).unwrap();
        assert_eq!(got, want);
    }

    #[test]
    fn events_carry_the_channel_the_input_streams_sample_index_and_the_value() {
        // history 3: the view holds 3 ticks, the stream index of this tick's first row is
        // what the block must add to its own count
        let input = sig("raw", &[25, 2], DType::F64, 3, false);
        let output = sig("ev", &[4, 3], DType::F64, 1, true);
        let ports = Ports {
            input: &input,
            output: &output,
            tick: TICK,
        };
        let opts = json!({"k": 5, "sign": "negative", "noise_window": 100, "peak_window": 3, "refractory": 10});
        let mut step = open("spikes", &opts, &ports).unwrap();
        // small noise-like values, and spikes at known samples (after the noise window)
        let n = 25 * 40;
        let mut x: Vec<f64> = (0..n * 2).map(|i| ((i as f64) * 1.7).sin() * 0.1).collect();
        let spikes = [(0usize, 150usize), (1, 151), (1, 400), (0, 733)];
        for &(c, s) in &spikes {
            x[s * 2 + c] = -5.0;
        }
        let got: Vec<[f64; 3]> = run(step.as_mut(), &input, &output, &x)
            .iter()
            .flat_map(|(b, rows)| {
                f64s(&b[..rows * 24])
                    .chunks_exact(3)
                    .map(|r| [r[0], r[1], r[2]])
                    .collect::<Vec<_>>()
            })
            .collect();
        // in the stream, after its 3 ticks of zero history
        let want: Vec<[f64; 3]> = spikes
            .iter()
            .map(|&(c, s)| [c as f64, (s + 75) as f64, -5.0])
            .collect();
        assert_eq!(got, want);
        assert!(step.finish().unwrap().ends_with("; 4 events"));
    }

    #[test]
    fn events_beyond_a_ticks_rows_are_counted_as_dropped() {
        let input = sig("raw", &[20, 4], DType::F32, 1, false);
        let output = sig("ev", &[2, 3], DType::F64, 1, true);
        let ports = Ports {
            input: &input,
            output: &output,
            tick: TICK,
        };
        let opts = json!({"k": 3, "noise_window": 20, "peak_window": 1});
        let mut step = open("spikes", &opts, &ports).unwrap();
        let mut x: Vec<f64> = (0..40 * 4)
            .map(|i| ((i as f64) * 0.7).sin() * 0.1)
            .collect();
        for c in 0..4 {
            x[30 * 4 + c] = -9.0; // four spikes in the second tick, room for two
        }
        let outs = run(step.as_mut(), &input, &output, &x);
        assert_eq!(outs.iter().map(|(_, n)| *n).collect::<Vec<_>>(), [0, 2]);
        let s = step.finish().unwrap();
        assert!(
            s.ends_with("; 2 events, 2 dropped (more than 2 in a tick: give the output more rows)"),
            "{s}"
        );
    }

    #[test]
    fn a_tick_a_block_cannot_run_is_a_typed_error_naming_the_block() {
        let input = sig("raw", &[30, 2], DType::F64, 1, false);
        let output = sig("y", &[30, 2], DType::F64, 1, false);
        let ports = Ports {
            input: &input,
            output: &output,
            tick: TICK,
        };
        let mut step = open("envelope", &json!({"window": 4}), &ports).unwrap();
        let e = step.step(&TickInfo::default(), &[], &mut []).unwrap_err();
        assert!(
            matches!(
                e,
                StepError::Block(BlockTickError::Ports {
                    block: "envelope",
                    inputs: 0,
                    outputs: 0
                })
            ),
            "{e:?}"
        );
        let short = vec![0u8; 8 * 2 * 10];
        let mut out = vec![0u8; 30 * 2 * 8];
        let e = step
            .step(
                &TickInfo::default(),
                &[InView {
                    signal: &input,
                    bytes: &short,
                    rows: 10,
                    first: 0,
                }],
                &mut [OutBuf {
                    signal: &output,
                    bytes: &mut out,
                    rows: 30,
                }],
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "block 'envelope': 'raw' holds 160 bytes this tick, fewer than one tick's 480"
        );
    }

    #[test]
    fn every_block_opens_with_its_defaults_or_says_what_it_needs() {
        let input = sig("raw", &[30, 4], DType::F32, 1, false);
        let same = sig("y", &[30, 4], DType::F32, 1, false);
        let ev = sig("ev", &[8, 3], DType::F64, 1, true);
        for b in BLOCKS {
            let output = match b.output {
                Output::Events => &ev,
                _ => &same,
            };
            let ports = Ports {
                input: &input,
                output,
                tick: TICK,
            };
            match check(b.name, &Value::Null, &ports) {
                Ok(d) => assert!(d.samples >= 0.0 && d.ms >= 0.0, "{}", b.name),
                Err(errors) => {
                    let [e] = errors.as_slice() else {
                        panic!("{}: {errors:?}", b.name)
                    };
                    assert_eq!(e.at, At::Block, "{}", b.name);
                    assert!(e.message.contains("missing option"), "{}: {e}", b.name);
                }
            }
        }
    }
}
