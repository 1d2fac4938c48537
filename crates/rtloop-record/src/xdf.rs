//! Reading XDF files (Lab Streaming Layer's format) so `rtloop replay` can play them: an
//! I/O-free parser of the chunk structure, stream headers and samples (numeric streams and
//! string marker streams), and a converter to an rtloop recording directory.

use std::collections::BTreeMap;
use std::path::Path;

use rtloop_stream::DType;

/// A malformed or unsupported XDF file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("XDF: {0}")]
pub struct XdfError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, XdfError> {
    Err(XdfError(s.into()))
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
            None => err(format!("truncated at byte {} (needed {n} more)", self.at)),
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
            other => err(format!(
                "a length field of {other} bytes (allowed 1, 4, 8) at byte {}",
                self.at - 1
            )),
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
        return err("not an XDF file: it does not start with \"XDF:\"");
    }
    let mut rd = Rd { b: bytes, at: 4 };
    let mut streams: BTreeMap<u32, XdfStream> = BTreeMap::new();
    while rd.at < bytes.len() {
        let len = rd.varlen()? as usize;
        if len < 2 {
            return err(format!("a chunk of length {len} at byte {}", rd.at));
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
                    .ok_or_else(|| XdfError(format!("stream {id}: no channel_count")))?;
                let format = tag(&xml, "channel_format")
                    .unwrap_or("float32")
                    .trim()
                    .to_owned();
                if word(&format).is_none() {
                    return err(format!("stream {id}: channel_format {format:?} is not supported (int8..int64, float32, double64, string)"));
                }
                if channels == 0 || channels > 1 << 20 {
                    return err(format!("stream {id}: {channels} channels"));
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
                    return err(format!("samples of stream {id} before its header"));
                };
                let n = c.varlen()?;
                let w = word(&s.format).expect("checked");
                for _ in 0..n {
                    let stamp = match c.u8()? {
                        0 => None,
                        8 => Some(f64::from_le_bytes(c.take(8)?.try_into().expect("8"))),
                        other => return err(format!("stream {id}: timestamp of {other} bytes")),
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
        return err("no stream header in the file");
    }
    Ok(streams.into_values().collect())
}

/// Convert stream `pick` (by name; default: the first numeric stream) of an XDF file into an
/// rtloop recording directory `out` (marker streams become its events). Returns the stream's
/// name.
pub fn to_recording(file: &Path, pick: Option<&str>, out: &Path) -> Result<String, XdfError> {
    let bytes = std::fs::read(file).map_err(|e| XdfError(format!("{}: {e}", file.display())))?;
    let streams = parse(&bytes)?;
    let numeric: Vec<&XdfStream> = streams.iter().filter(|s| s.dtype().is_some()).collect();
    let s = match pick {
        Some(p) => numeric
            .iter()
            .copied()
            .find(|s| s.name == p)
            .ok_or_else(|| {
                XdfError(format!(
                    "no numeric stream named {p:?}; the file has: {}",
                    numeric
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?,
        None => *numeric
            .first()
            .ok_or_else(|| XdfError("the file has no numeric stream to replay".into()))?,
    };
    let dtype = s.dtype().expect("numeric");
    std::fs::create_dir_all(out).map_err(|e| XdfError(e.to_string()))?;
    let t0 = s.stamps.first().copied().unwrap_or(0.0);
    let ns = |t: f64| ((t - t0).max(0.0) * 1e9) as u64;
    let stamps: Vec<u8> = s.stamps.iter().flat_map(|t| ns(*t).to_le_bytes()).collect();
    let w = |f: &str, b: &[u8]| std::fs::write(out.join(f), b).map_err(|e| XdfError(e.to_string()));
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
        assert!(parse(b"GDF 2.0").unwrap_err().0.contains("not an XDF file"));
        assert!(parse(b"XDF:\x04\xff\xff\x00\x00")
            .unwrap_err()
            .0
            .contains("truncated"));
        assert!(parse(b"XDF:\x03")
            .unwrap_err()
            .0
            .contains("allowed 1, 4, 8"));
        assert!(parse(b"XDF:").unwrap_err().0.contains("no stream header"));
        let mut f = b"XDF:".to_vec();
        f.extend(chunk(3, &[9, 0, 0, 0, 1, 0]));
        assert!(parse(&f).unwrap_err().0.contains("before its header"));
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
}
