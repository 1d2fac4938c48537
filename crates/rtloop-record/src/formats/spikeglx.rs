//! SpikeGLX: a `.bin` of interleaved little-endian int16 samples beside a `.meta` of
//! `key=value` lines (keys starting with `~` hold `(...)(...)` lists).
//!
//! Channel names come from `~snsChanMap` (`AP0`, ..., `SY0`), the rate from `imSampRate`,
//! `niSampRate` or `obSampRate`, and each channel's gain to physical units as SpikeGLX's
//! own tools and neo compute it:
//!
//! * imec, Neuropixels 1.0 style `~imroTbl` (entries of 6 fields: channel, bank, reference,
//!   AP gain, LF gain, filter): `imAiRangeMax / imMaxInt (512) × 1/gain × 1e6` µV, each
//!   channel with its own gain;
//! * imec, other probes (2.0 and later: one gain for all): `imChan0apGain` / `imChan0lfGain`,
//!   else 80, over `imMaxInt` (8192);
//! * nidq: `niAiRangeMax / 32768` V over `niMNGain` for MN channels and `niMAGain` for MA
//!   channels (XA: gain 1);
//! * OneBox (obx): `obAiRangeMax / obMaxInt` V.
//!
//! The sync channel (`SY*`) and digital words (nidq `XD`, OneBox `DW`) are bit fields: gain
//! 1 and no unit.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rtloop_stream::{DType, StreamConfig};

use crate::replay::{invalid, map_file, pick_series, FlatSource, Pacing, SourceError, SourceInfo};

/// A `.meta` file's keys (without the leading `~`) and values.
pub type Meta = BTreeMap<String, String>;

/// What is wrong with a `.meta` file: its text, or the layout it describes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MetaError {
    /// A line that is not `key=value`.
    #[error("line {line:?} is not key=value (a SpikeGLX .meta has one key=value per line)")]
    NotKeyValue {
        /// The line.
        line: String,
    },
    /// No `nSavedChans` key.
    #[error("no nSavedChans: not a SpikeGLX .meta")]
    NoChannelCount,
    /// A key the layout needs is missing.
    #[error("no {key}")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// A value that should be a number is not.
    #[error("{key}={value} is not a number")]
    NotANumber {
        /// The key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// A channel count out of range.
    #[error("nSavedChans={given} (allowed: 1 to {})", rtloop_stream::MAX_CHANNELS)]
    Channels {
        /// The count given.
        given: usize,
    },
    /// None of the rate keys.
    #[error("no imSampRate, niSampRate or obSampRate")]
    NoRate,
    /// A rate that is not a positive number.
    #[error("sample rate {rate} (allowed: a positive number)")]
    Rate {
        /// The rate given.
        rate: f64,
    },
    /// `snsChanMap` and `nSavedChans` disagree.
    #[error("snsChanMap names {names} channels, nSavedChans says {channels}")]
    NameCount {
        /// Names in `snsChanMap`.
        names: usize,
        /// `nSavedChans`.
        channels: usize,
    },
    /// No `imroTbl` entry for a channel (Neuropixels 1.0 style tables).
    #[error("imroTbl has no entry for channel {channel} ({name})")]
    NoImroEntry {
        /// The acquisition channel.
        channel: usize,
        /// Its name.
        name: String,
    },
    /// An `imroTbl` entry without gains.
    #[error("imroTbl entry ({entry}) of channel {channel} has no gains (a Neuropixels 1.0 entry has 6 fields)")]
    ImroEntry {
        /// The acquisition channel.
        channel: usize,
        /// The entry.
        entry: String,
    },
    /// An `imroTbl` gain that is not a number.
    #[error("imroTbl gain {value:?} of channel {channel} is not a number")]
    ImroGain {
        /// The acquisition channel.
        channel: usize,
        /// The gain's text.
        value: String,
    },
    /// A gain of 0 (the conversion would divide by it).
    #[error("gain 0 for channel {name}")]
    ZeroGain {
        /// The channel.
        name: String,
    },
    /// `snsMnMaXaDw` is not four counts.
    #[error("snsMnMaXaDw is not four counts")]
    Counts,
    /// A device rtloop does not read.
    #[error("typeThis={given} (allowed: imec, nidq, obx)")]
    Device {
        /// The `typeThis` given.
        given: String,
    },
}

/// Parse a `.meta` file's text.
///
/// # Errors
/// What is wrong ([`MetaError`]): not `key=value` lines, or no `nSavedChans`.
pub fn parse_meta(text: &str) -> Result<Meta, MetaError> {
    let mut m = Meta::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(MetaError::NotKeyValue {
                line: line.to_owned(),
            });
        };
        m.insert(k.trim_start_matches('~').to_owned(), v.to_owned());
    }
    if !m.contains_key("nSavedChans") {
        return Err(MetaError::NoChannelCount);
    }
    Ok(m)
}

/// The entries of a `(a)(b)(c)` list value, the first (its header) included.
fn entries(v: &str) -> Vec<&str> {
    v.trim()
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(")(")
        .collect()
}

/// The shape, names, units and gains a `.meta` describes.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// `imec`, `nidq` or `obx`.
    pub device: String,
    /// Channels per sample.
    pub n_channels: usize,
    /// Hz.
    pub rate: f64,
    /// Channel names.
    pub ch_names: Vec<String>,
    /// Units once the gain is applied.
    pub ch_units: Vec<String>,
    /// Gain per channel.
    pub gains: Vec<f64>,
    /// `fileSizeBytes`, when given.
    pub file_bytes: Option<u64>,
}

fn num<T: std::str::FromStr>(m: &Meta, key: &'static str) -> Result<T, MetaError> {
    let v = m.get(key).ok_or(MetaError::Missing { key })?;
    v.trim().parse().map_err(|_| MetaError::NotANumber {
        key,
        value: v.clone(),
    })
}

/// Work out the layout from a `.meta`; `stem` is the `.bin`'s file name without `.bin`
/// (`run_g0_t0.imec0.ap`), which says AP or LF.
///
/// # Errors
/// What is missing or malformed ([`MetaError`]).
pub fn layout(m: &Meta, stem: &str) -> Result<Layout, MetaError> {
    let n: usize = num(m, "nSavedChans")?;
    if n == 0 || n as u64 > rtloop_stream::MAX_CHANNELS {
        return Err(MetaError::Channels { given: n });
    }
    let rate: f64 = ["imSampRate", "niSampRate", "obSampRate"]
        .iter()
        .find(|k| m.contains_key(**k))
        .map(|k| num(m, k))
        .transpose()?
        .ok_or(MetaError::NoRate)?;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(MetaError::Rate { rate });
    }
    let device = match m.get("typeThis").map(String::as_str) {
        Some(t) => t.to_owned(),
        None if stem.contains(".imec") || m.contains_key("imAiRangeMax") => "imec".into(),
        None => "nidq".into(),
    };
    let ch_names: Vec<String> = match m.get("snsChanMap") {
        Some(v) => entries(v)
            .iter()
            .skip(1)
            .map(|e| e.split(';').next().unwrap_or("").to_owned())
            .collect(),
        None => (0..n).map(|i| format!("ch{i}")).collect(),
    };
    if ch_names.len() != n {
        return Err(MetaError::NameCount {
            names: ch_names.len(),
            channels: n,
        });
    }
    let mut gains = vec![1.0f64; n];
    let mut ch_units = vec![String::new(); n];
    let bits =
        |name: &str| name.starts_with("SY") || name.starts_with("XD") || name.starts_with("DW");
    match device.as_str() {
        "imec" => {
            let lf = stem.ends_with(".lf") || stem.ends_with(".lf.bin");
            let range: f64 = num(m, "imAiRangeMax")?;
            let imro = m.get("imroTbl").map(|v| entries(v)).unwrap_or_default();
            let np1 = imro
                .get(1)
                .is_some_and(|e| e.split_whitespace().count() >= 6);
            let max_int: f64 = match m.get("imMaxInt") {
                Some(_) => num(m, "imMaxInt")?,
                None if np1 => 512.0,
                None => 8192.0,
            };
            let factor = range / max_int;
            let key = if lf { "imChan0lfGain" } else { "imChan0apGain" };
            let fixed: f64 = match m.get(key) {
                Some(_) => num(m, key)?,
                None => 80.0,
            };
            for (i, name) in ch_names.iter().enumerate() {
                if bits(name) {
                    continue;
                }
                let g = if np1 {
                    // the channel's own imro entry: `AP12` is acquisition channel 12
                    let ch: usize = name
                        .trim_start_matches(|c: char| c.is_ascii_alphabetic())
                        .parse()
                        .unwrap_or(i);
                    let e = ch.checked_add(1).and_then(|k| imro.get(k)).ok_or_else(|| {
                        MetaError::NoImroEntry {
                            channel: ch,
                            name: name.clone(),
                        }
                    })?;
                    let v = e
                        .split_whitespace()
                        .nth(if lf { 4 } else { 3 })
                        .ok_or_else(|| MetaError::ImroEntry {
                            channel: ch,
                            entry: (*e).to_owned(),
                        })?;
                    v.parse::<f64>().map_err(|_| MetaError::ImroGain {
                        channel: ch,
                        value: v.to_owned(),
                    })?
                } else {
                    fixed
                };
                if g == 0.0 {
                    return Err(MetaError::ZeroGain { name: name.clone() });
                }
                // the same operations in the same order as SpikeGLX's tools and neo
                gains[i] = factor * (1.0 / g) * 1e6;
                ch_units[i] = "uV".into();
            }
        }
        "nidq" => {
            let range: f64 = num(m, "niAiRangeMax")?;
            let counts: Vec<usize> = m
                .get("snsMnMaXaDw")
                .ok_or(MetaError::Missing { key: "snsMnMaXaDw" })?
                .split(',')
                .map(|s| s.trim().parse::<usize>())
                .collect::<Result<_, _>>()
                .map_err(|_| MetaError::Counts)?;
            let [mn, ma, xa, _dw] = counts[..] else {
                return Err(MetaError::Counts);
            };
            let factor = range / 32768.0;
            let mn_gain: f64 = if mn > 0 { num(m, "niMNGain")? } else { 1.0 };
            let ma_gain: f64 = if ma > 0 { num(m, "niMAGain")? } else { 1.0 };
            for (i, name) in ch_names.iter().enumerate() {
                if bits(name) {
                    continue;
                }
                let per = if i < mn {
                    1.0 / mn_gain
                } else if i < mn + ma {
                    1.0 / ma_gain
                } else if i < mn + ma + xa {
                    1.0
                } else {
                    continue;
                };
                gains[i] = per * factor;
                ch_units[i] = "V".into();
            }
        }
        "obx" => {
            let range: f64 = num(m, "obAiRangeMax")?;
            let max_int: f64 = num(m, "obMaxInt")?;
            for (i, name) in ch_names.iter().enumerate() {
                if !bits(name) {
                    gains[i] = range / max_int;
                    ch_units[i] = "V".into();
                }
            }
        }
        other => {
            return Err(MetaError::Device {
                given: other.to_owned(),
            })
        }
    }
    Ok(Layout {
        device,
        n_channels: n,
        rate,
        ch_names,
        ch_units,
        gains,
        file_bytes: m.get("fileSizeBytes").and_then(|v| v.trim().parse().ok()),
    })
}

/// The `.bin` files under `dir` (and its subdirectories, as SpikeGLX puts each probe in
/// its own), sorted.
fn bins(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() && depth > 0 {
            bins(&p, depth - 1, out);
        } else if p.extension().is_some_and(|e| e == "bin") && p.with_extension("meta").is_file() {
            out.push(p);
        }
    }
}

/// Whether `path` looks like SpikeGLX: a `.bin` or `.meta` file, or a directory with a
/// `.bin` beside its `.meta`.
#[must_use]
pub fn detect(path: &Path) -> bool {
    if path.is_dir() {
        let mut v = Vec::new();
        bins(path, 2, &mut v);
        !v.is_empty()
    } else {
        path.extension().is_some_and(|e| e == "meta" || e == "bin")
    }
}

/// The series under `path`: `.bin` files by stem (`run_g0_t0.imec0.ap`).
fn series_of(path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    if path.is_dir() {
        let mut v = Vec::new();
        bins(path, 2, &mut v);
        return Ok(v);
    }
    let bin = path.with_extension("bin");
    if !bin.is_file() {
        return Err(invalid(
            &bin,
            format!("missing: {} needs its .bin beside it", path.display()),
        ));
    }
    Ok(vec![bin])
}

/// Open SpikeGLX `path` (a `.bin`, its `.meta`, or a directory holding them); `series`
/// picks a `.bin` by stem (or its end, `imec0.ap`) when a directory holds several.
///
/// # Errors
/// No `.meta` beside the `.bin`, a `.meta` that does not parse, a `.bin` that is not a
/// whole number of samples or shorter than the `.meta` says, or no such series.
pub fn open(path: &Path, series: Option<&str>) -> Result<FlatSource, SourceError> {
    if path.extension().is_some_and(|e| e == "bin") && !path.with_extension("meta").is_file() {
        return Err(invalid(
            &path.with_extension("meta"),
            format!(
                "missing: SpikeGLX writes a .meta beside every .bin, and {} cannot be read without it (its channel count, rate and gains are there)",
                path.display()
            ),
        ));
    }
    let bins = series_of(path)?;
    let names: Vec<String> = bins
        .iter()
        .map(|b| {
            b.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    let i = pick_series(path, &names, series)?;
    let (bin, stem) = (&bins[i], &names[i]);
    let meta_path = bin.with_extension("meta");
    let text = std::fs::read_to_string(&meta_path).map_err(crate::replay::io_error(&meta_path))?;
    let meta = parse_meta(&text).map_err(|d| invalid(&meta_path, d.to_string()))?;
    let l = layout(&meta, stem).map_err(|d| invalid(&meta_path, d.to_string()))?;
    let map = map_file(bin)?;
    let len = map.len() as u64;
    let sb = 2 * l.n_channels as u64;
    if len % sb != 0 {
        return Err(invalid(
            bin,
            format!(
                "{len} bytes is not a whole number of samples of {} int16 channels (nSavedChans in the .meta): truncated, or the .meta is another file's",
                l.n_channels
            ),
        ));
    }
    if let Some(want) = l.file_bytes.filter(|&w| w != len) {
        return Err(invalid(
            bin,
            format!(
                "the .meta says fileSizeBytes={want}, the file has {len} bytes: {}",
                if len < want {
                    "truncated (copy it again)"
                } else {
                    "the .meta is another file's"
                }
            ),
        ));
    }
    let info = SourceInfo {
        format: "spikeglx".into(),
        path: bin.clone(),
        series: stem.clone(),
        stream: StreamConfig {
            ch_names: l.ch_names,
            ch_units: l.ch_units,
            content_type: "ephys".into(),
            source_id: meta.get("imDatPrb_sn").cloned().unwrap_or_default(),
            ..StreamConfig::new(DType::I16, l.n_channels, l.rate, 0)
        },
        gains: l.gains,
        offsets: Vec::new(),
    };
    FlatSource::new(info, map, 0, len / sb, Pacing::Rate, Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np1_meta(ap_gain: u32) -> String {
        let mut imro = "(0,384)".to_string();
        let mut map = "(384,0,1)".to_string();
        for c in 0..384 {
            imro += &format!("({c} 0 0 {ap_gain} 250 1)");
            map += &format!("(AP{c};{c}:{c})");
        }
        map += "(SY0;768:768)";
        format!(
            "imAiRangeMax=0.6\nimSampRate=30000\nnSavedChans=385\nsnsApLfSy=384,0,1\n\
             typeThis=imec\nimDatPrb_type=0\n~imroTbl={imro}\n~snsChanMap={map}\n"
        )
    }

    #[test]
    fn neuropixels_1_gains_from_the_imro_table() {
        let m = parse_meta(&np1_meta(500)).unwrap();
        let l = layout(&m, "run_g0_t0.imec0.ap").unwrap();
        assert_eq!(l.n_channels, 385);
        assert_eq!(l.rate, 30000.0);
        assert_eq!(l.ch_names[0], "AP0");
        assert_eq!(l.ch_names[384], "SY0");
        // 0.6 V / 512 / 500 = 2.34375 µV per bit
        assert_eq!(l.gains[0], 0.6 / 512.0 * (1.0 / 500.0) * 1e6);
        assert!((l.gains[383] - 2.34375).abs() < 1e-12);
        assert_eq!((l.gains[384], l.ch_units[384].as_str()), (1.0, ""));
        assert_eq!(l.ch_units[0], "uV");
    }

    #[test]
    fn neuropixels_2_and_nidq_gains() {
        let m = parse_meta(
            "imAiRangeMax=0.62\nimMaxInt=8192\nimSampRate=30000\nnSavedChans=2\ntypeThis=imec\n\
             ~imroTbl=(24,384)(0 0 0 0 0)\n~snsChanMap=(1,0,1)(AP0;0:0)(SY0;384:384)\n",
        )
        .unwrap();
        let l = layout(&m, "x.imec0.ap").unwrap();
        assert_eq!(l.gains[0], 0.62 / 8192.0 * (1.0 / 80.0) * 1e6);
        let m = parse_meta(
            "niAiRangeMax=5\nniSampRate=25000\nnSavedChans=4\ntypeThis=nidq\nniMNGain=200\n\
             niMAGain=1\nsnsMnMaXaDw=2,0,1,1\n~snsChanMap=(2,0,1,1)(MN0;0:0)(MN1;1:1)(XA0;2:2)(XD0;3:3)\n",
        )
        .unwrap();
        let l = layout(&m, "x.nidq").unwrap();
        assert_eq!(l.gains[0], (1.0 / 200.0) * (5.0 / 32768.0));
        assert_eq!(l.gains[2], 5.0 / 32768.0);
        assert_eq!((l.gains[3], l.ch_units[3].as_str()), (1.0, ""));
        assert_eq!(l.ch_units[0], "V");
    }

    #[test]
    fn bad_meta_says_what_is_wrong() {
        let e = parse_meta("hello").unwrap_err();
        assert_eq!(
            e,
            MetaError::NotKeyValue {
                line: "hello".into()
            }
        );
        assert!(e.to_string().contains("key=value"), "{e}");
        let e = parse_meta("a=b\n").unwrap_err();
        assert_eq!(e, MetaError::NoChannelCount);
        assert!(e.to_string().contains("nSavedChans"), "{e}");
        let m = parse_meta(
            "nSavedChans=2\nimSampRate=30000\nimAiRangeMax=0.6\n~snsChanMap=(1)(AP0;0:0)\n",
        )
        .unwrap();
        let e = layout(&m, "x.imec0.ap").unwrap_err();
        assert_eq!(
            e,
            MetaError::NameCount {
                names: 1,
                channels: 2
            }
        );
        assert!(e.to_string().contains("snsChanMap names 1"), "{e}");
        let m = parse_meta("nSavedChans=99999999999\nimSampRate=30000\n").unwrap();
        let e = layout(&m, "x").unwrap_err();
        assert_eq!(e, MetaError::Channels { given: 99999999999 });
        assert!(e.to_string().contains("allowed: 1 to 1048576"), "{e}");
        let m = parse_meta("nSavedChans=1\nimSampRate=-3\n").unwrap();
        let e = layout(&m, "x").unwrap_err();
        assert_eq!(e, MetaError::Rate { rate: -3.0 });
        assert!(e.to_string().contains("positive"), "{e}");
        let m = parse_meta("nSavedChans=1\nimSampRate=fast\n").unwrap();
        let e = layout(&m, "x").unwrap_err();
        assert_eq!(e.to_string(), "imSampRate=fast is not a number");
        let m = parse_meta("nSavedChans=1\nimSampRate=30000\ntypeThis=imec\nimAiRangeMax=0.6\n~imroTbl=(0,384)\n~snsChanMap=(1)(AP5;5:5)\n").unwrap();
        // NP2-style (no 6-field entries): one gain for all
        assert!(layout(&m, "x.imec0.ap").is_ok());
        let m = parse_meta("nSavedChans=1\nimSampRate=30000\ntypeThis=imec\nimAiRangeMax=0.6\n~imroTbl=(0,384)(0 0 0 500 250 1)\n~snsChanMap=(1)(AP5;5:5)\n").unwrap();
        let e = layout(&m, "x.imec0.ap").unwrap_err();
        assert!(
            matches!(&e, MetaError::NoImroEntry { channel: 5, name } if name == "AP5"),
            "{e:?}"
        );
        assert!(e.to_string().contains("no entry for channel 5"), "{e}");
    }
}
