//! XDF files (Lab Streaming Layer's format), the one implementation rtloop has: an I/O-free
//! parser of the chunk structure, stream headers and samples (numeric streams and string
//! marker streams) so `rtloop replay` can play them, a converter to an rtloop recording
//! directory, and [`write_recording`], which writes a recording as XDF (what
//! `rtloop.export.to_xdf` calls).

use std::collections::BTreeMap;
use std::path::Path;

use rtloop_stream::DType;

/// A malformed or unsupported XDF file, or one that cannot be read or converted: what is
/// wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum XdfError {
    /// The file does not start with `XDF:`.
    #[error("XDF: not an XDF file: it does not start with \"XDF:\"")]
    NotXdf,
    /// The file ends inside a field.
    #[error("XDF: truncated at byte {at} (needed {need} more)")]
    Truncated {
        /// Where the field starts.
        at: usize,
        /// Bytes the field needs.
        need: usize,
    },
    /// A length field's own size is not 1, 4 or 8 bytes.
    #[error("XDF: a length field of {bytes} bytes (allowed 1, 4, 8) at byte {at}")]
    LengthField {
        /// The size the file gives.
        bytes: u8,
        /// Where.
        at: usize,
    },
    /// A chunk too short to hold its tag.
    #[error("XDF: a chunk of length {len} at byte {at} (at least 2: its tag)")]
    ShortChunk {
        /// Its length.
        len: usize,
        /// Where its body starts.
        at: usize,
    },
    /// A stream header without `<channel_count>`.
    #[error("XDF: stream {id}: no channel_count")]
    NoChannelCount {
        /// The stream id.
        id: u32,
    },
    /// A `<channel_format>` rtloop does not read.
    #[error("XDF: stream {id}: channel_format {format:?} is not supported (int8..int64, float32, double64, string)")]
    Format {
        /// The stream id.
        id: u32,
        /// The format given.
        format: String,
    },
    /// A channel count out of range.
    #[error("XDF: stream {id}: {channels} channels (allowed 1 to 1048576)")]
    Channels {
        /// The stream id.
        id: u32,
        /// The count given.
        channels: usize,
    },
    /// Samples of a stream whose header has not come yet.
    #[error("XDF: samples of stream {id} before its header")]
    SamplesBeforeHeader {
        /// The stream id.
        id: u32,
    },
    /// A timestamp field that is neither absent (0) nor 8 bytes.
    #[error("XDF: stream {id}: timestamp of {bytes} bytes (allowed 0 or 8)")]
    Timestamp {
        /// The stream id.
        id: u32,
        /// The size the file gives.
        bytes: u8,
    },
    /// No stream header at all.
    #[error("XDF: no stream header in the file")]
    NoStream,
    /// No numeric stream of the name asked for.
    #[error("XDF: no numeric stream named {name:?}; the file has: {}", has.join(", "))]
    NoSuchStream {
        /// The name asked for.
        name: String,
        /// The numeric streams there are.
        has: Vec<String>,
    },
    /// Only marker (string) streams.
    #[error("XDF: the file has no numeric stream to replay")]
    NoNumericStream,
    /// Reading the file or writing the recording failed.
    #[error("XDF: {}: {source}", path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// One stream of an XDF file.
#[derive(Debug, Clone, PartialEq)]
pub struct XdfStream {
    /// Stream id in the file.
    pub id: u32,
    /// `<name>`.
    pub name: String,
    /// `<type>`.
    pub kind: String,
    /// Channels.
    pub channels: usize,
    /// Nominal rate (0 = irregular).
    pub srate: f64,
    /// `<channel_format>`.
    pub format: String,
    /// Channel labels, if given.
    pub labels: Vec<String>,
    /// Numeric samples, little-endian, sample-major (empty for string streams).
    pub data: Vec<u8>,
    /// String samples (marker streams): one entry per sample, channels joined with `|`.
    pub strings: Vec<String>,
    /// One timestamp per sample, seconds (deduced from the rate where the file omits it).
    pub stamps: Vec<f64>,
}

impl XdfStream {
    /// The rtloop dtype of a numeric stream.
    #[must_use]
    pub fn dtype(&self) -> Option<DType> {
        Some(match self.format.as_str() {
            "int8" => DType::I8,
            "int16" => DType::I16,
            "int32" => DType::I32,
            "int64" => DType::I64,
            "float32" => DType::F32,
            "double64" => DType::F64,
            _ => return None,
        })
    }
}

struct Rd<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], XdfError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        match end {
            Some(e) => {
                let s = &self.b[self.at..e];
                self.at = e;
                Ok(s)
            }
            None => Err(XdfError::Truncated {
                at: self.at,
                need: n,
            }),
        }
    }
    fn u8(&mut self) -> Result<u8, XdfError> {
        Ok(self.take(1)?[0])
    }
    fn uint(&mut self, n: usize) -> Result<u64, XdfError> {
        let s = self.take(n)?;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(s);
        Ok(u64::from_le_bytes(v))
    }
    fn varlen(&mut self) -> Result<u64, XdfError> {
        match self.u8()? {
            n @ (1 | 4 | 8) => self.uint(n as usize),
            other => Err(XdfError::LengthField {
                bytes: other,
                at: self.at - 1,
            }),
        }
    }
}

fn tag<'x>(xml: &'x str, name: &str) -> Option<&'x str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let a = xml.find(&open)? + open.len();
    let b = xml[a..].find(&close)? + a;
    Some(&xml[a..b])
}

fn all_tags<'x>(xml: &'x str, name: &str) -> Vec<&'x str> {
    let (open, close) = (format!("<{name}>"), format!("</{name}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(a) = rest.find(&open) {
        let from = a + open.len();
        let Some(b) = rest[from..].find(&close) else {
            break;
        };
        out.push(&rest[from..from + b]);
        rest = &rest[from + b + close.len()..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn word(format: &str) -> Option<usize> {
    Some(match format {
        "int8" => 1,
        "int16" => 2,
        "int32" | "float32" => 4,
        "int64" | "double64" => 8,
        "string" => 0,
        _ => return None,
    })
}

/// Parse a whole XDF file.
pub fn parse(bytes: &[u8]) -> Result<Vec<XdfStream>, XdfError> {
    if !bytes.starts_with(b"XDF:") {
        return Err(XdfError::NotXdf);
    }
    let mut rd = Rd { b: bytes, at: 4 };
    let mut streams: BTreeMap<u32, XdfStream> = BTreeMap::new();
    while rd.at < bytes.len() {
        let len = rd.varlen()? as usize;
        if len < 2 {
            return Err(XdfError::ShortChunk { len, at: rd.at });
        }
        let chunk = rd.take(len)?;
        let tag_id = u16::from_le_bytes([chunk[0], chunk[1]]);
        let body = &chunk[2..];
        match tag_id {
            2 => {
                let mut c = Rd { b: body, at: 0 };
                let id = c.uint(4)? as u32;
                let xml = String::from_utf8_lossy(&body[4..]);
                let channels: usize = tag(&xml, "channel_count")
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or(XdfError::NoChannelCount { id })?;
                let format = tag(&xml, "channel_format")
                    .unwrap_or("float32")
                    .trim()
                    .to_owned();
                if word(&format).is_none() {
                    return Err(XdfError::Format { id, format });
                }
                if channels == 0 || channels > 1 << 20 {
                    return Err(XdfError::Channels { id, channels });
                }
                streams.insert(
                    id,
                    XdfStream {
                        id,
                        name: unescape(tag(&xml, "name").unwrap_or("xdf")),
                        kind: unescape(tag(&xml, "type").unwrap_or("")),
                        channels,
                        srate: tag(&xml, "nominal_srate")
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0.0),
                        format,
                        labels: all_tags(&xml, "label").into_iter().map(unescape).collect(),
                        data: Vec::new(),
                        strings: Vec::new(),
                        stamps: Vec::new(),
                    },
                );
            }
            3 => {
                let mut c = Rd { b: body, at: 0 };
                let id = c.uint(4)? as u32;
                let Some(s) = streams.get_mut(&id) else {
                    return Err(XdfError::SamplesBeforeHeader { id });
                };
                let n = c.varlen()?;
                let w = word(&s.format).expect("checked");
                for _ in 0..n {
                    let stamp = match c.u8()? {
                        0 => None,
                        8 => Some(f64::from_le_bytes(c.take(8)?.try_into().expect("8"))),
                        other => return Err(XdfError::Timestamp { id, bytes: other }),
                    };
                    let t = stamp.unwrap_or_else(|| match (s.stamps.last(), s.srate > 0.0) {
                        (Some(l), true) => l + 1.0 / s.srate,
                        (Some(l), false) => *l,
                        (None, _) => 0.0,
                    });
                    s.stamps.push(t);
                    if w == 0 {
                        let mut parts = Vec::with_capacity(s.channels);
                        for _ in 0..s.channels {
                            let len = c.varlen()? as usize;
                            parts.push(String::from_utf8_lossy(c.take(len)?).into_owned());
                        }
                        s.strings.push(parts.join("|"));
                    } else {
                        s.data.extend_from_slice(c.take(w * s.channels)?);
                    }
                }
            }
            // file header, clock offsets, boundaries, footers: not needed to replay
            _ => {}
        }
    }
    if streams.is_empty() {
        return Err(XdfError::NoStream);
    }
    Ok(streams.into_values().collect())
}

/// Convert stream `pick` (by name; default: the first numeric stream) of an XDF file into an
/// rtloop recording directory `out` (marker streams become its events). Returns the stream's
/// name.
pub fn to_recording(file: &Path, pick: Option<&str>, out: &Path) -> Result<String, XdfError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| XdfError::Io { path, source }
    };
    let bytes = std::fs::read(file).map_err(io(file))?;
    let streams = parse(&bytes)?;
    let numeric: Vec<&XdfStream> = streams.iter().filter(|s| s.dtype().is_some()).collect();
    let s = match pick {
        Some(p) => numeric
            .iter()
            .copied()
            .find(|s| s.name == p)
            .ok_or_else(|| XdfError::NoSuchStream {
                name: p.to_owned(),
                has: numeric.iter().map(|s| s.name.clone()).collect(),
            })?,
        None => *numeric.first().ok_or(XdfError::NoNumericStream)?,
    };
    let dtype = s.dtype().expect("numeric");
    std::fs::create_dir_all(out).map_err(io(out))?;
    let t0 = s.stamps.first().copied().unwrap_or(0.0);
    let ns = |t: f64| ((t - t0).max(0.0) * 1e9) as u64;
    let stamps: Vec<u8> = s.stamps.iter().flat_map(|t| ns(*t).to_le_bytes()).collect();
    let w = |f: &str, b: &[u8]| std::fs::write(out.join(f), b).map_err(io(&out.join(f)));
    w("data.bin", &s.data)?;
    w("timestamps.bin", &stamps)?;
    let mut events = String::new();
    for m in streams.iter().filter(|m| m.format == "string") {
        for (text, t) in m.strings.iter().zip(&m.stamps) {
            let i = s.stamps.partition_point(|x| x < t) as u64;
            let (kind, value) = text
                .split_once('=')
                .unwrap_or((m.name.as_str(), text.as_str()));
            events.push_str(&serde_json::json!({"type": kind, "value": value, "sample": i, "offset": 0, "duration": 0, "stamp_ns": ns(*t)}).to_string());
            events.push('\n');
        }
    }
    w("events.jsonl", events.as_bytes())?;
    let header = crate::Header {
        format: crate::FORMAT.into(),
        version: 1,
        stream: s.name.clone(),
        dtype: dtype.name().into(),
        n_channels: s.channels,
        ch_names: if s.labels.len() == s.channels {
            s.labels.clone()
        } else {
            Vec::new()
        },
        ch_units: Vec::new(),
        ch_types: Vec::new(),
        content_type: s.kind.clone(),
        source_id: String::new(),
        description: String::new(),
        sfreq: s.srate,
        first_sample: 0,
        start_monotonic_ns: 0,
        start_unix_ns: 0,
        samples: s.stamps.len() as u64,
        events: events.lines().count() as u64,
        lost_samples: 0,
        gaps: Vec::new(),
        lost_events: 0,
        complete: true,
        ended: Some(format!("converted from {}", file.display())),
        rtloop_version: env!("CARGO_PKG_VERSION").into(),
        segment: 1,
    };
    w(
        "header.json",
        &serde_json::to_vec_pretty(&header).expect("json"),
    )?;
    Ok(s.name.clone())
}

/// Give each sample of a regular stream its own time, as readers and pylsl do: the file
/// keeps one stamp per commit (its last sample's) for every sample of the commit, and each
/// earlier sample of the commit is one period earlier. `stamps` are little-endian u64 ns.
fn back_date_commits(stamps: &mut [u8], rate: f64) {
    let period = 1e9 / rate;
    let mut after = 0u64; // samples after this one in its commit
    let mut later: Option<u64> = None; // the next sample's stamp as the file has it
    for chunk in stamps.chunks_exact_mut(8).rev() {
        let stamp = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        after = if later == Some(stamp) { after + 1 } else { 0 };
        later = Some(stamp);
        let t = stamp.saturating_sub((after as f64 * period).round() as u64);
        chunk.copy_from_slice(&t.to_le_bytes());
    }
}

/// XDF's channel format of an rtloop dtype (XDF has no unsigned formats): the inverse of
/// [`XdfStream::dtype`].
fn xdf_format(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::I32 => "int32",
        DType::I64 => "int64",
        DType::F32 => "float32",
        DType::F64 => "double64",
        _ => return None,
    })
}

/// XDF's variable-length count: 1, 4 or 8 bytes of length, then the value.
fn varlen(out: &mut Vec<u8>, n: u64) {
    if n < 256 {
        out.extend([1, n as u8]);
    } else if n < 1 << 32 {
        out.push(4);
        out.extend((n as u32).to_le_bytes());
    } else {
        out.push(8);
        out.extend(n.to_le_bytes());
    }
}

/// One chunk: its length (tag included), the tag, the content.
fn put_chunk(out: &mut Vec<u8>, tag: u16, content: &[u8]) {
    varlen(out, content.len() as u64 + 2);
    out.extend(tag.to_le_bytes());
    out.extend(content);
}

/// A number as Python's `repr` writes it (`1000.0`, `0.5`, `1e-05`), which is how
/// recordings exported before this writer spelled rates, times and event values.
fn py_float(x: f64) -> String {
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let a = x.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        // Python: shortest round-trip digits in exponent form, two-digit exponent at least
        let s = format!("{x:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let s = format!("{x}");
    if s.contains('.') {
        s
    } else {
        format!("{s}.0")
    }
}

/// An event's type or value as text: a string as it is, numbers as Python prints a list.
fn event_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|x| x.as_f64().map_or_else(|| x.to_string(), py_float))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// What a StreamHeader chunk says of one stream.
struct StreamInfo<'a> {
    sid: u32,
    name: &'a str,
    /// LSL's stream type (`EEG`, `Markers`, ...; empty: none given).
    kind: &'a str,
    /// Empty: `rtloop-NAME`, so XDF tools still tell the stream from others.
    source_id: &'a str,
    nch: usize,
    srate: f64,
    fmt: &'a str,
    labels: &'a [String],
    units: &'a [String],
    types: &'a [String],
    /// The stream's free-form description: a JSON object becomes elements of `desc` (as
    /// LSL's `desc()` holds them), other text one `<description>` element.
    description: &'a str,
}

/// An XML element name for a description key: XML names allow letters, digits, `_`, `-`
/// and `.` (not first), so any other character becomes `_`.
fn xml_name(key: &str) -> String {
    let mut n: String = key
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !n.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        n.insert(0, '_');
    }
    n
}

/// A description value as XML under an element named `key`: objects nest, arrays repeat
/// the element (as XDF readers give lists of elements), other values are text.
fn desc_xml(out: &mut String, key: &str, v: &serde_json::Value) {
    let tag = xml_name(key);
    match v {
        serde_json::Value::Array(items) => {
            for item in items {
                desc_xml(out, key, item);
            }
        }
        serde_json::Value::Object(map) => {
            out.push_str(&format!("<{tag}>"));
            for (k, x) in map {
                desc_xml(out, k, x);
            }
            out.push_str(&format!("</{tag}>"));
        }
        serde_json::Value::String(s) => {
            out.push_str(&format!("<{tag}>{}</{tag}>", xml_escape(s)));
        }
        other => out.push_str(&format!("<{tag}>{other}</{tag}>")),
    }
}

fn stream_header(i: &StreamInfo<'_>) -> Vec<u8> {
    let StreamInfo {
        sid,
        name,
        kind,
        source_id,
        nch,
        srate,
        fmt,
        labels,
        units,
        types,
        description,
    } = *i;
    let pick = |v: &[String], i: usize| v.get(i).map_or(String::new(), |s| xml_escape(s));
    let chans: String = (0..nch)
        .map(|i| {
            let label = labels.get(i).cloned().unwrap_or_else(|| format!("ch{i}"));
            let mut ch = format!(
                "<channel><label>{}</label><unit>{}</unit>",
                xml_escape(&label),
                pick(units, i)
            );
            if !types.is_empty() {
                ch.push_str(&format!("<type>{}</type>", pick(types, i)));
            }
            ch.push_str("</channel>");
            ch
        })
        .collect();
    let mut extra = String::new();
    match serde_json::from_str::<serde_json::Value>(description) {
        Ok(serde_json::Value::Object(map)) => {
            // the channels and acquisition written above are the stream's own
            for (k, v) in map
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "channels" | "acquisition"))
            {
                desc_xml(&mut extra, k, v);
            }
        }
        _ if description.is_empty() => {}
        _ => desc_xml(
            &mut extra,
            "description",
            &serde_json::Value::String(description.into()),
        ),
    }
    let n = xml_escape(name);
    let sid_text = if source_id.is_empty() {
        format!("rtloop-{n}")
    } else {
        xml_escape(source_id)
    };
    let xml = format!(
        "<?xml version=\"1.0\"?><info><name>{n}</name><type>{}</type><channel_count>{nch}</channel_count>\
         <nominal_srate>{}</nominal_srate><channel_format>{fmt}</channel_format>\
         <source_id>{sid_text}</source_id><version>1.1</version><created_at>0</created_at>\
         <uid>rtloop-{n}-{sid}</uid><desc><channels>{chans}</channels><acquisition>\
         <manufacturer>rtloop</manufacturer></acquisition>{extra}</desc></info>",
        xml_escape(kind),
        py_float(srate),
    );
    let mut c = sid.to_le_bytes().to_vec();
    c.extend(xml.as_bytes());
    c
}

fn footer(sid: u32, first: f64, last: f64, count: u64) -> Vec<u8> {
    let xml = format!(
        "<?xml version=\"1.0\"?><info><first_timestamp>{}</first_timestamp>\
         <last_timestamp>{}</last_timestamp><sample_count>{count}</sample_count></info>",
        py_float(first),
        py_float(last)
    );
    let mut c = sid.to_le_bytes().to_vec();
    c.extend(xml.as_bytes());
    c
}

/// Why a recording could not be written as XDF.
#[derive(Debug, thiserror::Error)]
pub enum XdfWriteError {
    /// The recording could not be read.
    #[error(transparent)]
    Load(#[from] crate::LoadError),
    /// XDF has no channel format for the recording's dtype.
    #[error("XDF has no {0} channel format; allowed: int8, int16, int32, int64, float32, float64")]
    Dtype(String),
    /// Reading the recording's files or writing the XDF file failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Write the recording in `dir` (as `rtloop record` wrote it) to the XDF file `out`: stream 1
/// holds the samples with their timestamps (CLOCK_MONOTONIC seconds), `chunk` samples per
/// Samples chunk; stream 2 (if there are events) a marker stream of the events as strings
/// `"type=value"` at the timestamps of their samples' rows (an event on a lost sample gets
/// the time of the next recorded sample). Reads and writes in blocks, so recordings larger
/// than memory are fine. Returns the samples written.
///
/// # Errors
/// An unreadable recording, a dtype XDF cannot hold, or an I/O error (named with its file).
pub fn write_recording(dir: &Path, out: &Path, chunk: usize) -> Result<u64, XdfWriteError> {
    use std::io::{BufWriter, Read, Write};
    let rec = crate::Recording::open(dir)?;
    let h = &rec.header;
    // Recording::open checked that the dtype parses
    let dtype: Option<DType> = h.dtype.parse().ok();
    let fmt = dtype
        .and_then(xdf_format)
        .ok_or_else(|| XdfWriteError::Dtype(h.dtype.clone()))?;
    let sb = dtype.map_or(1, DType::itemsize) * h.n_channels;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| XdfWriteError::Io { path, source }
    };
    let open = |f: &str| -> Result<std::io::BufReader<std::fs::File>, XdfWriteError> {
        let p = dir.join(f);
        std::fs::File::open(&p)
            .map(|f| std::io::BufReader::with_capacity(1 << 20, f))
            .map_err(io(&p))
    };
    let mut data = open("data.bin")?;
    let mut stamps_file = open("timestamps.bin")?;
    let n = rec.samples;
    // every row's time is needed again for the events: keep the stamps (8 bytes per sample)
    let mut stamps = vec![0u8; n as usize * 8];
    stamps_file
        .read_exact(&mut stamps)
        .map_err(io(&dir.join("timestamps.bin")))?;
    if h.sfreq > 0.0 {
        back_date_commits(&mut stamps, h.sfreq);
    }
    let ts = |i: u64| {
        let b = &stamps[i as usize * 8..i as usize * 8 + 8];
        u64::from_le_bytes(b.try_into().unwrap_or_default()) as f64 * 1e-9
    };
    let mut f = BufWriter::with_capacity(1 << 20, std::fs::File::create(out).map_err(io(out))?);
    let mut buf = b"XDF:".to_vec();
    put_chunk(
        &mut buf,
        1,
        b"<?xml version=\"1.0\"?><info><version>1.0</version></info>",
    );
    put_chunk(
        &mut buf,
        2,
        &stream_header(&StreamInfo {
            sid: 1,
            name: &h.stream,
            kind: &h.content_type,
            source_id: &h.source_id,
            nch: h.n_channels,
            srate: h.sfreq,
            fmt,
            labels: &h.ch_names,
            units: &h.ch_units,
            types: &h.ch_types,
            description: &h.description,
        }),
    );
    let chunk = chunk.max(1) as u64;
    let mut rows = vec![0u8; chunk as usize * sb];
    let mut a = 0u64;
    while a < n {
        let b = n.min(a + chunk);
        let k = (b - a) as usize;
        data.read_exact(&mut rows[..k * sb])
            .map_err(io(&dir.join("data.bin")))?;
        let mut c = 1u32.to_le_bytes().to_vec();
        varlen(&mut c, b - a);
        for (r, row) in rows[..k * sb].chunks_exact(sb.max(1)).enumerate() {
            c.push(8);
            c.extend(ts(a + r as u64).to_le_bytes());
            c.extend(row);
        }
        put_chunk(&mut buf, 3, &c);
        f.write_all(&buf).map_err(io(out))?;
        buf.clear();
        a = b;
    }
    if n > 0 {
        put_chunk(&mut buf, 6, &footer(1, ts(0), ts(n - 1), n));
    }
    let events = rec.events()?;
    if !events.is_empty() {
        put_chunk(
            &mut buf,
            2,
            &stream_header(&StreamInfo {
                sid: 2,
                name: &format!("{}-events", h.stream),
                kind: "Markers",
                source_id: "",
                nch: 1,
                srate: 0.0,
                fmt: "string",
                labels: &["event".to_owned()],
                units: &[],
                types: &[],
                description: "",
            }),
        );
        let mut c = 2u32.to_le_bytes().to_vec();
        varlen(&mut c, events.len() as u64);
        let (mut first, mut last) = (0.0, 0.0);
        for (k, e) in events.iter().enumerate() {
            let sample = e["sample"].as_u64().unwrap_or(0);
            let t = if n > 0 {
                ts(h.row_of(sample).0.min(n - 1))
            } else {
                e["stamp_ns"].as_f64().unwrap_or(0.0) * 1e-9
            };
            if k == 0 {
                first = t;
            }
            last = t;
            let text = format!("{}={}", event_text(&e["type"]), event_text(&e["value"]));
            c.push(8);
            c.extend(t.to_le_bytes());
            varlen(&mut c, text.len() as u64);
            c.extend(text.as_bytes());
        }
        put_chunk(&mut buf, 3, &c);
        put_chunk(&mut buf, 6, &footer(2, first, last, events.len() as u64));
    }
    f.write_all(&buf).map_err(io(out))?;
    f.flush().map_err(io(out))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(tag: u16, body: &[u8]) -> Vec<u8> {
        let mut v = vec![4u8];
        v.extend_from_slice(&((body.len() + 2) as u32).to_le_bytes());
        v.extend_from_slice(&tag.to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn parses_numeric_and_marker_streams() {
        let mut f = b"XDF:".to_vec();
        let mut h = 1u32.to_le_bytes().to_vec();
        h.extend_from_slice(b"<info><name>eeg</name><channel_count>2</channel_count><nominal_srate>100</nominal_srate><channel_format>int16</channel_format><desc><channels><channel><label>Fz</label></channel><channel><label>Cz</label></channel></channels></desc></info>");
        f.extend(chunk(2, &h));
        let mut m = 2u32.to_le_bytes().to_vec();
        m.extend_from_slice(b"<info><name>mk</name><channel_count>1</channel_count><nominal_srate>0</nominal_srate><channel_format>string</channel_format></info>");
        f.extend(chunk(2, &m));
        let mut s = 1u32.to_le_bytes().to_vec();
        s.extend_from_slice(&[1, 2]);
        s.push(8);
        s.extend_from_slice(&10.0f64.to_le_bytes());
        s.extend_from_slice(&[1, 0, 2, 0]);
        s.push(0); // no stamp: deduced
        s.extend_from_slice(&[3, 0, 4, 0]);
        f.extend(chunk(3, &s));
        let mut ms = 2u32.to_le_bytes().to_vec();
        ms.extend_from_slice(&[1, 1, 8]);
        ms.extend_from_slice(&10.01f64.to_le_bytes());
        ms.extend_from_slice(&[1, 7]);
        ms.extend_from_slice(b"stim=on");
        f.extend(chunk(3, &ms));
        let st = parse(&f).unwrap();
        assert_eq!(st[0].labels, ["Fz", "Cz"]);
        assert_eq!(st[0].data, [1, 0, 2, 0, 3, 0, 4, 0]);
        assert!((st[0].stamps[1] - 10.01).abs() < 1e-12);
        assert_eq!(st[1].strings, ["stim=on"]);
    }

    #[test]
    fn damaged_and_foreign_files_are_named() {
        let e = parse(b"GDF 2.0").unwrap_err();
        assert!(matches!(e, XdfError::NotXdf), "{e:?}");
        assert!(e.to_string().contains("not an XDF file"), "{e}");
        let e = parse(b"XDF:\x04\xff\xff\x00\x00").unwrap_err();
        assert!(
            matches!(
                e,
                XdfError::Truncated {
                    at: 9,
                    need: 0xffff
                }
            ),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "XDF: truncated at byte 9 (needed 65535 more)"
        );
        let e = parse(b"XDF:\x03").unwrap_err();
        assert!(
            matches!(e, XdfError::LengthField { bytes: 3, at: 4 }),
            "{e:?}"
        );
        assert!(e.to_string().contains("allowed 1, 4, 8"), "{e}");
        let e = parse(b"XDF:").unwrap_err();
        assert!(matches!(e, XdfError::NoStream), "{e:?}");
        assert!(e.to_string().contains("no stream header"), "{e}");
        let mut f = b"XDF:".to_vec();
        f.extend(chunk(3, &[9, 0, 0, 0, 1, 0]));
        let e = parse(&f).unwrap_err();
        assert!(
            matches!(e, XdfError::SamplesBeforeHeader { id: 9 }),
            "{e:?}"
        );
        assert!(e.to_string().contains("before its header"), "{e}");
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut x = 12345u64;
        for n in 0..2000 {
            let mut b = b"XDF:".to_vec();
            for _ in 0..(n % 64) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b.push((x & 0xff) as u8);
            }
            let _ = parse(&b);
        }
    }

    /// A recording directory written by hand: 5 samples of 2 int16 channels, a gap of 3
    /// lost samples after row 2, two events (one on a lost sample).
    fn recording(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let header = serde_json::json!({
            "format": crate::FORMAT, "version": 1, "stream": "eeg", "dtype": "int16",
            "n_channels": 2, "ch_names": ["Fz", "C<z>"], "ch_units": ["uV", "uV"],
            "sfreq": 250.0, "first_sample": 10, "start_monotonic_ns": 0, "start_unix_ns": 0,
            "samples": 5, "events": 2, "lost_samples": 3, "gaps": [[2, 3]],
            "complete": true, "ended": "stopped", "rtloop_version": "test"
        });
        std::fs::write(dir.join("header.json"), header.to_string()).unwrap();
        let data: Vec<u8> = (0..10i16).flat_map(i16::to_le_bytes).collect();
        std::fs::write(dir.join("data.bin"), data).unwrap();
        let stamps: Vec<u8> = (0..5u64)
            .flat_map(|k| (1_000_000_000 + k * 4_000_000).to_le_bytes())
            .collect();
        std::fs::write(dir.join("timestamps.bin"), stamps).unwrap();
        std::fs::write(
            dir.join("events.jsonl"),
            "{\"type\":\"stim\",\"value\":\"on\",\"sample\":11}\n\
             {\"type\":\"vals\",\"value\":[1.0,2.5],\"sample\":13}\n",
        )
        .unwrap();
    }

    #[test]
    fn a_recording_written_as_xdf_reads_back_through_the_parser() {
        let d = rtloop_testkit::TempDir::new("xdf-write");
        recording(&d.join("rec"));
        let out = d.join("r.xdf");
        // 2 samples per Samples chunk: three chunks for five samples
        assert_eq!(write_recording(&d.join("rec"), &out, 2).unwrap(), 5);
        let st = parse(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(st.len(), 2);
        assert_eq!(
            (st[0].name.as_str(), st[0].channels, st[0].srate),
            ("eeg", 2, 250.0)
        );
        assert_eq!(st[0].labels, ["Fz", "C<z>"]);
        let want: Vec<u8> = (0..10i16).flat_map(i16::to_le_bytes).collect();
        assert_eq!(st[0].data, want);
        assert_eq!(st[0].stamps, [1.0, 1.004, 1.008, 1.012, 1.016]);
        // events at their rows' times: sample 11 is row 1; sample 13 was lost in the gap, so
        // it gets the next recorded row's (row 2)
        assert_eq!(st[1].strings, ["stim=on", "vals=[1.0, 2.5]"]);
        assert_eq!(st[1].stamps, [1.004, 1.008]);
    }

    #[test]
    fn each_sample_of_a_commit_gets_its_own_time_back_dated_by_the_rate() {
        // commits of 3, 1 and 2 samples, 2 ns apart at 500 MHz
        let mut b: Vec<u8> = [10u64, 10, 10, 20, 30, 30]
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect();
        back_date_commits(&mut b, 5e8);
        let t: Vec<u64> = b
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(t, [6, 8, 10, 20, 28, 30]);
    }

    #[test]
    fn what_xdf_cannot_hold_is_refused_by_name() {
        let d = rtloop_testkit::TempDir::new("xdf-write-bad");
        recording(&d.join("rec"));
        let h = d.join("rec").join("header.json");
        let text = std::fs::read_to_string(&h)
            .unwrap()
            .replace("int16", "uint16");
        std::fs::write(&h, text).unwrap();
        let e = write_recording(&d.join("rec"), &d.join("r.xdf"), 4096).unwrap_err();
        assert_eq!(
            e.to_string(),
            "XDF has no uint16 channel format; allowed: int8, int16, int32, int64, float32, float64"
        );
        let e = write_recording(&d.join("nothing"), &d.join("r.xdf"), 4096).unwrap_err();
        assert!(matches!(e, XdfWriteError::Load(_)), "{e:?}");
    }

    #[test]
    fn numbers_are_spelled_as_python_prints_them() {
        for (x, s) in [
            (1000.0, "1000.0"),
            (0.5, "0.5"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (123_456.789, "123456.789"),
            (0.0, "0.0"),
            (-2.0, "-2.0"),
        ] {
            assert_eq!(py_float(x), s);
        }
    }
}
