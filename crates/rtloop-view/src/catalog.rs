//! Every stream on the machine, as the page lists it: what `rtloop stream list` shows, as
//! typed rows the server serialises.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use rtloop_stream::{Liveness, Stream};

/// The writer of a stream, as the page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum WriterState {
    /// No writer ever opened the stream.
    None,
    /// A writer holds it.
    Alive {
        /// Its process.
        pid: u32,
        /// Milliseconds since its last commit or heartbeat.
        since_commit_ms: u64,
    },
    /// The last writer closed it cleanly.
    Closed,
    /// The writer's process died without closing it.
    Dead {
        /// Its process.
        pid: u32,
    },
}

impl From<Liveness> for WriterState {
    fn from(l: Liveness) -> Self {
        match l {
            Liveness::NoWriter => WriterState::None,
            Liveness::Closed => WriterState::Closed,
            Liveness::Dead { pid } => WriterState::Dead { pid },
            Liveness::Active {
                pid,
                since_heartbeat_ns,
            } => WriterState::Alive {
                pid,
                since_commit_ms: since_heartbeat_ns / 1_000_000,
            },
        }
    }
}

/// One stream's row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StreamRow {
    /// Its name.
    pub name: String,
    /// Sample type.
    pub dtype: &'static str,
    /// Channels.
    pub n_channels: usize,
    /// Nominal rate in Hz (0: irregular).
    pub rate: f64,
    /// Samples the ring keeps.
    pub capacity: u64,
    /// Its writer.
    pub writer: WriterState,
    /// Content type (EEG, latency, ...).
    pub content_type: String,
    /// Description set by its creator.
    pub description: String,
    /// Why the stream's shared counters cannot be right, when they cannot (the page then
    /// says "damaged" and why, and shows none of them).
    pub damage: Option<String>,
    /// Its counters (absent when damaged).
    #[serde(flatten)]
    pub counters: Option<Counters>,
}

/// What a stream's shared counters say.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Counters {
    /// Samples committed so far.
    pub written: u64,
    /// Occupancy of the slowest reader (ONIX PercentUsed).
    pub percent_used: f64,
    /// Highest occupancy a reader saw, percent.
    pub high_water_percent: f64,
    /// Samples readers lost to overruns.
    pub lost_samples: u64,
    /// Events pushed so far.
    pub events_written: u64,
    /// Registered readers.
    pub readers: usize,
}

/// A stream's channels, as the scope labels them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChannelInfo {
    /// Names (one per channel; `ch<i>` where the stream has none).
    pub names: Vec<String>,
    /// Units (empty where unknown).
    pub units: Vec<String>,
}

impl StreamRow {
    fn of(s: &Stream) -> Self {
        let i = s.info();
        let damage = s.damage();
        let counters = damage.is_none().then(|| {
            let st = s.stats();
            Counters {
                written: st.written,
                percent_used: st.percent_used,
                high_water_percent: st.high_water as f64 * 100.0 / st.capacity as f64,
                lost_samples: st.lost_samples,
                events_written: st.events_written,
                readers: st.readers.len(),
            }
        });
        StreamRow {
            name: i.name.clone(),
            dtype: i.dtype.name(),
            n_channels: i.n_channels,
            rate: i.nominal_rate,
            capacity: i.capacity,
            writer: s.writer_liveness().into(),
            content_type: i.content_type.clone(),
            description: i.description.clone(),
            damage,
            counters,
        }
    }
}

/// The channels of `s`, with a name for each.
#[must_use]
pub fn channels(s: &Stream) -> ChannelInfo {
    let i = s.info();
    let pick = |v: &Vec<String>, k: usize, default: String| {
        v.get(k)
            .filter(|x| !x.is_empty())
            .cloned()
            .unwrap_or(default)
    };
    ChannelInfo {
        names: (0..i.n_channels)
            .map(|k| pick(&i.ch_names, k, format!("ch{k}")))
            .collect(),
        units: (0..i.n_channels)
            .map(|k| pick(&i.ch_units, k, String::new()))
            .collect(),
    }
}

/// Open streams kept between listings, so a listing maps only streams it has not seen
/// (a stream replaced under the same name is a new file and is opened again).
#[derive(Default)]
pub struct Catalog {
    open: HashMap<String, (u64, Stream)>,
}

impl Catalog {
    /// Every stream in the shared-memory directory, by name. A stream that cannot be opened
    /// (being created, or not an rtloop stream) is left out of this listing.
    pub fn list(&mut self) -> Vec<StreamRow> {
        let names = Stream::list();
        self.open.retain(|n, _| names.contains(n));
        let mut rows = Vec::with_capacity(names.len());
        for n in names {
            if let Some(s) = self.get(&n) {
                // the streams rtloop's tools use inside (the lab's transport) are not data
                if !s.info().internal {
                    rows.push(StreamRow::of(s));
                }
            }
        }
        rows.sort_by(|a, b| a.name.cmp(&b.name));
        rows
    }

    /// The stream `name`, opened once per file.
    pub fn get(&mut self, name: &str) -> Option<&Stream> {
        let ino = std::fs::metadata(rtloop_stream::stream_path(name))
            .ok()?
            .ino();
        let fresh = self.open.get(name).is_some_and(|(i, _)| *i == ino);
        if !fresh {
            let s = Stream::open(name).ok()?;
            self.open.insert(name.to_owned(), (ino, s));
        }
        self.open.get(name).map(|(_, s)| s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtloop_stream::{DType, StreamConfig};

    #[test]
    fn a_stream_is_listed_with_its_writer_and_leaves_the_list_when_closed() {
        let name = rtloop_testkit::unique_name("view-cat");
        let mut cfg = StreamConfig::new(DType::I16, 2, 500.0, 1000);
        cfg.ch_names = vec!["Fz".into(), String::new()];
        let s = Stream::create(&name, &cfg).unwrap();
        let mut cat = Catalog::default();
        let row = |cat: &mut Catalog| cat.list().into_iter().find(|r| r.name == name);
        assert_eq!(row(&mut cat).unwrap().writer, WriterState::None);
        let mut w = s.writer().unwrap();
        w.write(&[1i16, 2, 3, 4]).unwrap();
        let r = row(&mut cat).unwrap();
        assert!(matches!(r.writer, WriterState::Alive { .. }), "{r:?}");
        assert_eq!(
            (
                r.dtype,
                r.n_channels,
                r.rate,
                r.counters.as_ref().map(|c| c.written)
            ),
            ("int16", 2, 500.0, Some(2))
        );
        assert_eq!(channels(cat.get(&name).unwrap()).names, vec!["Fz", "ch1"]);
        // a clean close ends the stream: its name goes, and so does its row
        drop(w);
        assert!(row(&mut cat).is_none());
    }
}
