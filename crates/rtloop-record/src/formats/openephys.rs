//! Open Ephys binary format: a recording directory
//! (`Record Node N/experimentE/recordingR/`) with `structure.oebin` (JSON) describing its
//! continuous streams and event channels, `continuous/<stream>/continuous.dat`
//! (interleaved little-endian int16) with `sample_numbers.npy` (GUI 0.6 and later;
//! `timestamps.npy` holds the sample numbers before that), and
//! `events/<stream>/TTL/{sample_numbers,states}.npy` (`timestamps.npy` and
//! `channel_states.npy` before 0.6) and text events (`text.npy`).
//!
//! Each channel's name and `bit_volts` (its gain) come from the `.oebin`, its unit from
//! `units` (empty: µV, or V for `ADC` channels, as the format's documentation and neo say).
//! TTL events are one event per rising edge at its sample, type `"TTL"`, value the line
//! number, duration up to the next falling edge of the same line (0 if there is none), as
//! neo pairs them; text events (the GUI's message center) are type `"text"` with the text.

use std::path::{Path, PathBuf};

use rtloop_stream::{DType, EventValue, StreamConfig};
use serde_json::Value;

use super::npy::{self, Npy};
use crate::replay::{
    invalid, io_error, map_file, pick_series, FlatSource, Pacing, SourceError, SourceEvent,
    SourceInfo,
};

/// One continuous stream as the `.oebin` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Continuous {
    /// `folder_name` without its trailing `/`.
    pub folder: String,
    /// `stream_name` (or the folder when absent).
    pub stream_name: String,
    /// Hz.
    pub rate: f64,
    /// Channel names.
    pub ch_names: Vec<String>,
    /// `bit_volts` per channel.
    pub gains: Vec<f64>,
    /// Units per channel.
    pub units: Vec<String>,
}

/// One event channel as the `.oebin` describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct EventChannel {
    /// `folder_name` without its trailing `/` (`Acquisition_Board-100.Rhythm Data/TTL`).
    pub folder: String,
    /// `stream_name` (empty when absent).
    pub stream_name: String,
}

/// What is wrong with a `structure.oebin`.
#[derive(Debug, thiserror::Error)]
pub enum OebinError {
    /// The text is not JSON.
    #[error("not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// No `continuous` list.
    #[error("no \"continuous\" list: not an Open Ephys structure.oebin")]
    NoContinuous,
    /// An entry without a usable `folder_name` (empty, or leading out with `..`).
    #[error("a {list} entry without a folder_name")]
    NoFolder {
        /// `continuous` or `events`.
        list: &'static str,
    },
    /// A stream without a positive `sample_rate`.
    #[error("{folder}: no positive sample_rate")]
    NoRate {
        /// The stream's folder.
        folder: String,
    },
    /// A stream without a `channels` list.
    #[error("{folder}: no channels list")]
    NoChannelList {
        /// The stream's folder.
        folder: String,
    },
    /// `num_channels` and the channels listed disagree.
    #[error("{folder}: num_channels is {said} but {listed} channels are listed")]
    ChannelCount {
        /// The stream's folder.
        folder: String,
        /// `num_channels`.
        said: u64,
        /// Channels listed.
        listed: usize,
    },
    /// An empty channels list.
    #[error("{folder}: no channels")]
    NoChannels {
        /// The stream's folder.
        folder: String,
    },
    /// A channel without `bit_volts`.
    #[error("{folder}: channel {channel} has no bit_volts")]
    NoGain {
        /// The stream's folder.
        folder: String,
        /// The channel's name.
        channel: String,
    },
}

/// Parse a `structure.oebin`.
///
/// # Errors
/// What is wrong ([`OebinError`]): not JSON, no `continuous` list, a stream without a
/// folder, rate or channels, channel counts that disagree.
pub fn parse_oebin(text: &str) -> Result<(Vec<Continuous>, Vec<EventChannel>), OebinError> {
    let v: Value = serde_json::from_str(text).map_err(OebinError::NotJson)?;
    let cont = v
        .get("continuous")
        .and_then(Value::as_array)
        .ok_or(OebinError::NoContinuous)?;
    let folder = |c: &Value, list: &'static str| -> Result<String, OebinError> {
        c.get("folder_name")
            .and_then(Value::as_str)
            .map(|s| s.trim_end_matches('/').to_owned())
            .filter(|s| !s.is_empty() && !s.split('/').any(|p| p == ".."))
            .ok_or(OebinError::NoFolder { list })
    };
    let mut out = Vec::new();
    for c in cont {
        let f = folder(c, "continuous")?;
        let rate = c
            .get("sample_rate")
            .and_then(Value::as_f64)
            .filter(|r| r.is_finite() && *r > 0.0)
            .ok_or_else(|| OebinError::NoRate { folder: f.clone() })?;
        let chans = c
            .get("channels")
            .and_then(Value::as_array)
            .ok_or_else(|| OebinError::NoChannelList { folder: f.clone() })?;
        if let Some(n) = c.get("num_channels").and_then(Value::as_u64) {
            if n as usize != chans.len() {
                return Err(OebinError::ChannelCount {
                    folder: f,
                    said: n,
                    listed: chans.len(),
                });
            }
        }
        if chans.is_empty() {
            return Err(OebinError::NoChannels { folder: f });
        }
        let mut names = Vec::new();
        let mut gains = Vec::new();
        let mut units = Vec::new();
        for (i, ch) in chans.iter().enumerate() {
            let name = ch
                .get("channel_name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("CH{}", i + 1), str::to_owned);
            let g =
                ch.get("bit_volts")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| OebinError::NoGain {
                        folder: f.clone(),
                        channel: name.clone(),
                    })?;
            let u = ch.get("units").and_then(Value::as_str).unwrap_or("");
            units.push(if !u.is_empty() {
                u.to_owned()
            } else if name.contains("ADC") {
                "V".to_owned()
            } else {
                "uV".to_owned()
            });
            names.push(name);
            gains.push(g);
        }
        out.push(Continuous {
            stream_name: c
                .get("stream_name")
                .and_then(Value::as_str)
                .map_or_else(|| f.clone(), str::to_owned),
            folder: f,
            rate,
            ch_names: names,
            gains,
            units,
        });
    }
    let mut events = Vec::new();
    for e in v
        .get("events")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        events.push(EventChannel {
            folder: folder(e, "events")?,
            stream_name: e
                .get("stream_name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        });
    }
    Ok((out, events))
}

/// The `structure.oebin` files at or under `path`, sorted.
fn oebins(path: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if path.is_file() {
        if path.file_name().is_some_and(|n| n == "structure.oebin") {
            out.push(path.to_owned());
        }
        return;
    }
    let direct = path.join("structure.oebin");
    if direct.is_file() {
        out.push(direct);
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(path) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        oebins(&d, depth - 1, out);
    }
}

/// Whether `path` is (or holds, up to four levels down) an Open Ephys binary recording.
#[must_use]
pub fn detect(path: &Path) -> bool {
    let mut v = Vec::new();
    oebins(path, 4, &mut v);
    !v.is_empty()
}

fn read_npy(path: &Path) -> Result<Option<Npy>, SourceError> {
    match std::fs::read(path) {
        Ok(b) => npy::parse(&b).map(Some).map_err(|d| invalid(path, d)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path)(e)),
    }
}

/// The first of `names` that exists in `dir`, read.
fn first_npy(dir: &Path, names: &[&str]) -> Result<Option<(PathBuf, Npy)>, SourceError> {
    for n in names {
        let p = dir.join(n);
        if let Some(a) = read_npy(&p)? {
            return Ok(Some((p, a)));
        }
    }
    Ok(None)
}

/// TTL edges (`states`: +line rising, -line falling, at `samples`) as events, one per
/// rising edge with the duration to the next falling edge of its line.
#[must_use]
pub fn ttl_events(samples: &[i64], states: &[i64], first: i64) -> Vec<SourceEvent> {
    let mut out = Vec::new();
    for (i, (&s, &st)) in samples.iter().zip(states).enumerate() {
        let Some(row) = s.checked_sub(first).filter(|&r| r >= 0 && st > 0) else {
            continue;
        };
        let fall = samples[i + 1..]
            .iter()
            .zip(&states[i + 1..])
            .find(|&(_, &x)| x == -st || x == st)
            .filter(|&(_, &x)| x == -st)
            .map(|(&f, _)| f);
        out.push(SourceEvent {
            row: row as u64,
            kind: EventValue::Text("TTL".into()),
            value: EventValue::i64(st),
            duration: fall.map_or(0, |f| f.saturating_sub(s).max(0) as u64),
            offset: 0,
        });
    }
    out
}

/// Open an Open Ephys binary recording at or under `path` (`structure.oebin`, the
/// recording directory, or a directory above it); `series` picks a continuous stream by
/// folder name (`Neuropix-PXI-100.ProbeA-AP`), with its recording's path before it when
/// `path` holds several recordings.
///
/// # Errors
/// A `.oebin` that does not parse, a missing or truncated `continuous.dat`, event files
/// that do not parse, or no such series.
pub fn open(path: &Path, series: Option<&str>) -> Result<FlatSource, SourceError> {
    let mut files = Vec::new();
    oebins(path, 4, &mut files);
    if files.is_empty() {
        return Err(SourceError::Unrecognised {
            path: path.to_owned(),
            detail: "no structure.oebin here or below".into(),
        });
    }
    let base = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    let mut all: Vec<(PathBuf, usize, Continuous, Vec<EventChannel>, String)> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).map_err(io_error(f))?;
        let (cont, evs) = parse_oebin(&text).map_err(|d| invalid(f, d.to_string()))?;
        let dir = f.parent().unwrap_or(Path::new(".")).to_owned();
        let prefix = dir
            .strip_prefix(base)
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty() && files.len() > 1);
        for (k, c) in cont.into_iter().enumerate() {
            let name = match &prefix {
                Some(p) => format!("{p}/{}", c.folder),
                None => c.folder.clone(),
            };
            all.push((dir.clone(), k, c, evs.clone(), name));
        }
    }
    let names: Vec<String> = all.iter().map(|a| a.4.clone()).collect();
    let i = pick_series(path, &names, series)?;
    let (dir, index, c, evs, name) = all.swap_remove(i);
    let cdir = dir.join("continuous").join(&c.folder);
    let dat = cdir.join("continuous.dat");
    if !dat.is_file() {
        return Err(invalid(
            &dat,
            format!(
                "missing: the structure.oebin lists stream {} whose samples are in this file",
                c.folder
            ),
        ));
    }
    let map = map_file(&dat)?;
    let n = c.ch_names.len();
    let sb = 2 * n as u64;
    let len = map.len() as u64;
    if len % sb != 0 {
        return Err(invalid(
            &dat,
            format!(
                "{len} bytes is not a whole number of samples of {n} int16 channels (the structure.oebin's channels): truncated"
            ),
        ));
    }
    let rows = len / sb;
    let numbers = first_npy(&cdir, &["sample_numbers.npy", "timestamps.npy"])?;
    let first = match &numbers {
        Some((p, a)) => {
            let ints = a
                .ints()
                .ok_or_else(|| invalid(p, "sample numbers are not numbers"))?;
            if (ints.len() as u64) > rows {
                return Err(invalid(
                    &dat,
                    format!(
                        "holds {rows} samples but {} lists {}: continuous.dat is truncated",
                        p.display(),
                        ints.len()
                    ),
                ));
            }
            ints.first().copied().unwrap_or(0)
        }
        None => 0,
    };
    let mut events = Vec::new();
    for e in &evs {
        let mine = e.folder.starts_with(&format!("{}/", c.folder))
            || (!e.stream_name.is_empty()
                && e.stream_name == c.stream_name
                && !e.folder.starts_with("MessageCenter"))
            // the message center counts in the first stream's samples
            || (e.folder.starts_with("MessageCenter") && index == 0);
        if !mine {
            continue;
        }
        let edir = dir.join("events").join(&e.folder);
        let Some((sp, samples)) = first_npy(&edir, &["sample_numbers.npy", "timestamps.npy"])?
        else {
            continue;
        };
        let samples = samples
            .ints()
            .ok_or_else(|| invalid(&sp, "sample numbers are not numbers"))?;
        if let Some((tp, Npy::Text(text))) = first_npy(&edir, &["text.npy"])? {
            if text.len() != samples.len() {
                return Err(invalid(
                    &tp,
                    format!("{} texts for {} sample numbers", text.len(), samples.len()),
                ));
            }
            for (s, t) in samples.iter().zip(text) {
                if let Some(row) = s.checked_sub(first).filter(|&r| r >= 0) {
                    events.push(SourceEvent {
                        row: row as u64,
                        kind: EventValue::Text("text".into()),
                        value: EventValue::Text(t),
                        duration: 0,
                        offset: 0,
                    });
                }
            }
        } else if let Some((stp, states)) = first_npy(&edir, &["states.npy", "channel_states.npy"])?
        {
            let states = states
                .ints()
                .ok_or_else(|| invalid(&stp, "TTL states are not numbers"))?;
            if states.len() != samples.len() {
                return Err(invalid(
                    &stp,
                    format!(
                        "{} states for {} sample numbers",
                        states.len(),
                        samples.len()
                    ),
                ));
            }
            events.extend(ttl_events(&samples, &states, first));
        }
    }
    let info = SourceInfo {
        format: "openephys".into(),
        path: dat,
        series: name,
        stream: StreamConfig {
            ch_names: c.ch_names,
            ch_units: c.units,
            content_type: "ephys".into(),
            source_id: c.stream_name,
            ..StreamConfig::new(DType::I16, n, c.rate, 0)
        },
        gains: c.gains,
        offsets: Vec::new(),
    };
    FlatSource::new(info, map, 0, rows, Pacing::Rate, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_streams_and_event_channels() {
        let text = r#"{"GUI version": "0.6.7",
          "continuous": [{"folder_name": "Acquisition_Board-100.Rhythm Data/", "sample_rate": 30000.0,
            "stream_name": "Rhythm Data", "num_channels": 3, "channels": [
              {"channel_name": "CH1", "bit_volts": 0.195, "units": "uV"},
              {"channel_name": "CH2", "bit_volts": 0.195, "units": ""},
              {"channel_name": "ADC1", "bit_volts": 0.00015258789, "units": ""}]}],
          "events": [{"folder_name": "Acquisition_Board-100.Rhythm Data/TTL/", "stream_name": "Rhythm Data"},
                     {"folder_name": "MessageCenter/"}]}"#;
        let (c, e) = parse_oebin(text).unwrap();
        assert_eq!(c[0].folder, "Acquisition_Board-100.Rhythm Data");
        assert_eq!(c[0].ch_names, ["CH1", "CH2", "ADC1"]);
        assert_eq!(c[0].units, ["uV", "uV", "V"]);
        assert_eq!(c[0].gains[0], 0.195);
        assert_eq!(e[0].folder, "Acquisition_Board-100.Rhythm Data/TTL");
        assert_eq!(e[1].folder, "MessageCenter");
    }

    #[test]
    fn bad_oebin_says_what_is_wrong() {
        let e = parse_oebin("{").unwrap_err();
        assert!(matches!(e, OebinError::NotJson(_)), "{e:?}");
        assert!(e.to_string().starts_with("not JSON: "), "{e}");
        let e = parse_oebin("{}").unwrap_err();
        assert!(matches!(e, OebinError::NoContinuous), "{e:?}");
        assert!(e.to_string().contains("no \"continuous\""), "{e}");
        let e = parse_oebin(
            r#"{"continuous": [{"folder_name": "a/", "sample_rate": 1, "num_channels": 2, "channels": [{"channel_name": "x", "bit_volts": 1}]}]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(&e, OebinError::ChannelCount { folder, said: 2, listed: 1 } if folder == "a"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "a: num_channels is 2 but 1 channels are listed"
        );
        let e = parse_oebin(
            r#"{"continuous": [{"folder_name": "../x", "sample_rate": 1, "channels": []}]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(e, OebinError::NoFolder { list: "continuous" }),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "a continuous entry without a folder_name");
        let e = parse_oebin(
            r#"{"continuous": [{"folder_name": "a", "sample_rate": 1, "channels": [{"channel_name": "x"}]}]}"#,
        )
        .unwrap_err();
        assert!(
            matches!(&e, OebinError::NoGain { channel, .. } if channel == "x"),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "a: channel x has no bit_volts");
    }

    #[test]
    fn ttl_edges_pair_into_events() {
        // line 1 up at 10, line 2 up at 12, line 1 down at 15, line 2 never down, line 3
        // down without an up
        let ev = ttl_events(&[10, 12, 15, 20], &[1, 2, -1, -3], 5);
        assert_eq!(ev.len(), 2);
        assert_eq!((ev[0].row, ev[0].duration), (5, 5));
        assert_eq!(ev[0].value, EventValue::i64(1));
        assert_eq!((ev[1].row, ev[1].duration), (7, 0));
    }
}
