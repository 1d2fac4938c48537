//! Occupancy and liveness: what `rtloop stream list` / `monitor` show (the ONIX memory
//! monitor's PercentUsed, per stream).

use crate::reader::{liveness, Liveness};
use crate::ring::slot_state;
use crate::sync::Ordering;
use crate::sys::ProcessId;
use crate::{ReaderMode, Stream};

/// One registered reader, as seen from outside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderStats {
    /// Slot index.
    pub slot: usize,
    /// Reader process.
    pub pid: u32,
    /// Mode.
    pub mode: ReaderMode,
    /// Next sample it will pull.
    pub cursor: u64,
    /// Samples written but not pulled by it.
    pub lag: u64,
    /// Samples it lost to overruns.
    pub lost: u64,
    /// Overruns it saw.
    pub overruns: u64,
    /// Whether its process is alive.
    pub alive: bool,
}

/// A snapshot of a stream's counters.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamStats {
    /// Samples committed so far.
    pub written: u64,
    /// Samples kept.
    pub capacity: u64,
    /// `written - slowest reader's cursor`, at most `capacity` (0 without readers).
    pub occupancy: u64,
    /// `occupancy / capacity * 100` (ONIX PercentUsed).
    pub percent_used: f64,
    /// Highest occupancy a reader saw when it pulled.
    pub high_water: u64,
    /// Overruns reported to readers.
    pub overruns: u64,
    /// Samples lost by readers.
    pub lost_samples: u64,
    /// Events pushed so far.
    pub events_written: u64,
    /// Writer commits so far.
    pub commits: u64,
    /// Writer state.
    pub writer: Liveness,
    /// Registered readers.
    pub readers: Vec<ReaderStats>,
}

impl<B: crate::Backing> Stream<B> {
    /// A snapshot of the stream's counters, readers and writer state.
    #[must_use]
    pub fn stats(&self) -> StreamStats {
        let c = self.map.control();
        let written = c.samples.written();
        let capacity = self.info().capacity;
        let readers: Vec<ReaderStats> = c
            .readers
            .iter()
            .enumerate()
            .filter_map(|(slot, s)| {
                // SYNC: Acquire pairs with the reader's Release of its slot word.
                let word = s.state.load(Ordering::Acquire);
                let mode = match slot_state::tag(word) {
                    slot_state::LATEST => ReaderMode::Latest,
                    slot_state::LOSSLESS => ReaderMode::Lossless,
                    _ => return None,
                };
                let holder = ProcessId::from_word(word)?;
                let pid = holder.pid();
                // SYNC: Relaxed: a statistics snapshot.
                let cursor = s.cursor.load(Ordering::Relaxed);
                Some(ReaderStats {
                    slot,
                    pid,
                    mode,
                    cursor,
                    lag: written.saturating_sub(cursor),
                    lost: s.lost.load(Ordering::Relaxed),
                    overruns: s.overruns.load(Ordering::Relaxed),
                    alive: holder.alive(),
                })
            })
            .collect();
        let occupancy = readers
            .iter()
            .map(|r| r.lag)
            .max()
            .unwrap_or(0)
            .min(capacity);
        StreamStats {
            written,
            capacity,
            occupancy,
            percent_used: occupancy as f64 * 100.0 / capacity as f64,
            // SYNC: Relaxed: statistics.
            high_water: c.stats.high_water.load(Ordering::Relaxed).min(capacity),
            overruns: c.stats.overruns.load(Ordering::Relaxed),
            lost_samples: c.stats.lost_samples.load(Ordering::Relaxed),
            events_written: c.events.written(),
            commits: c.owner.commits.load(Ordering::Relaxed),
            writer: liveness(self),
            readers,
        }
    }

    /// The writer's state.
    #[must_use]
    pub fn writer_liveness(&self) -> Liveness {
        liveness(self)
    }
}
