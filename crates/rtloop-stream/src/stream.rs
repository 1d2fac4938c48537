//! A stream handle over any [`Backing`]: what the writer and readers are made from.

use std::path::PathBuf;
use std::sync::Arc;

use crate::backing::Backing;
use crate::claims;
use crate::error::ClaimError;
use crate::layout::MAX_READERS;
use crate::ring::slot_state;
use crate::sync::Ordering;
use crate::sys::{self, ProcessId};
use crate::{DType, Reader, ReaderMode, Writer};

/// The backing a [`Stream`] has unless told otherwise: the mapped stream file (the loom
/// build has no files and uses the heap).
#[cfg(not(loom))]
pub type DefaultBacking = crate::SharedMemory;
/// The backing a [`Stream`] has unless told otherwise (loom build: the heap).
#[cfg(loom)]
pub type DefaultBacking = crate::backing::HeapBacking;

/// What a new stream looks like.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Value type of every channel.
    pub dtype: DType,
    /// Channels per sample.
    pub n_channels: usize,
    /// Nominal sample rate in Hz (0 = irregular).
    pub nominal_rate: f64,
    /// Samples kept (rounded up so the data is a whole number of pages).
    pub capacity: u64,
    /// Events kept.
    pub event_capacity: u64,
    /// Channel names (empty = `ch0`, `ch1`, ...).
    pub ch_names: Vec<String>,
    /// Channel units (empty = none).
    pub ch_units: Vec<String>,
    /// Channel types, LSL's and MNE's "EEG", "ACC", "STIM", ... (empty = none).
    pub ch_types: Vec<String>,
    /// What the stream carries, LSL's stream type ("EEG", "Markers", ...; empty = none).
    pub content_type: String,
    /// Who produces it: a serial number or rig name that stays the same across restarts.
    pub source_id: String,
    /// Free-form description (rtloop's Python package stores JSON here, as LSL's `desc`).
    pub description: String,
    /// Keep the name when the writer closes cleanly. By default a clean close removes the
    /// name (readers already attached read on; the memory comes back when the last one
    /// unmaps it), so an ended stream is never resolved again and never piles up.
    pub keep: bool,
    /// Used inside one rtloop tool: hidden from listings and resolution unless asked for.
    pub internal: bool,
}

impl StreamConfig {
    /// A config with the given shape, 1024 events and no labels.
    #[must_use]
    pub fn new(dtype: DType, n_channels: usize, nominal_rate: f64, capacity: u64) -> Self {
        StreamConfig {
            dtype,
            n_channels,
            nominal_rate,
            capacity,
            event_capacity: 1024,
            ch_names: Vec::new(),
            ch_units: Vec::new(),
            ch_types: Vec::new(),
            content_type: String::new(),
            source_id: String::new(),
            description: String::new(),
            keep: false,
            internal: false,
        }
    }
}

/// The static description of an open stream (a copy of its header).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamInfo {
    /// Name.
    pub name: String,
    /// Value type.
    pub dtype: DType,
    /// Channels per sample.
    pub n_channels: usize,
    /// Bytes per sample.
    pub sample_bytes: usize,
    /// Samples kept.
    pub capacity: u64,
    /// Events kept.
    pub event_capacity: u64,
    /// Nominal rate in Hz (0 = irregular).
    pub nominal_rate: f64,
    /// Channel names.
    pub ch_names: Vec<String>,
    /// Channel units.
    pub ch_units: Vec<String>,
    /// Channel types (empty: none given).
    pub ch_types: Vec<String>,
    /// Content type (empty: none given).
    pub content_type: String,
    /// Source id (empty: none given).
    pub source_id: String,
    /// Free-form description (empty: none given).
    pub description: String,
    /// Pid of the process that created the stream.
    pub creator_pid: u32,
    /// Creation time, Unix ns.
    pub created_unix_ns: u64,
    /// Size of the shared-memory file.
    pub file_bytes: u64,
    /// Path of the shared-memory file.
    pub path: PathBuf,
    /// The name outlives a clean close ([`StreamConfig::keep`]).
    pub keep: bool,
    /// Used inside one rtloop tool ([`StreamConfig::internal`]).
    pub internal: bool,
}

/// An open stream: the handle readers and the writer are made from.
pub struct Stream<B: Backing = DefaultBacking> {
    pub(crate) map: Arc<B>,
    info: Arc<StreamInfo>,
}

impl<B: Backing> Clone for Stream<B> {
    fn clone(&self) -> Self {
        Stream {
            map: Arc::clone(&self.map),
            info: Arc::clone(&self.info),
        }
    }
}

impl<B: Backing> std::fmt::Debug for Stream<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

#[cfg(any(test, loom))]
impl Stream<crate::backing::HeapBacking> {
    /// A stream in this process's heap (for the loom models, miri and unit tests): the same
    /// writer and readers as a shared-memory stream, over atomic words.
    #[must_use]
    pub fn in_heap(cfg: &StreamConfig) -> Self {
        let backing = crate::backing::HeapBacking::new(
            cfg.capacity,
            cfg.n_channels * cfg.dtype.itemsize(),
            cfg.event_capacity,
        );
        let info = StreamInfo {
            name: "heap".to_owned(),
            dtype: cfg.dtype,
            n_channels: cfg.n_channels,
            sample_bytes: cfg.n_channels * cfg.dtype.itemsize(),
            capacity: cfg.capacity,
            event_capacity: cfg.event_capacity,
            nominal_rate: cfg.nominal_rate,
            ch_names: (0..cfg.n_channels).map(|i| format!("ch{i}")).collect(),
            ch_units: vec![String::new(); cfg.n_channels],
            ch_types: cfg.ch_types.clone(),
            content_type: cfg.content_type.clone(),
            source_id: cfg.source_id.clone(),
            description: cfg.description.clone(),
            creator_pid: 0,
            created_unix_ns: 0,
            file_bytes: 0,
            path: PathBuf::new(),
            keep: cfg.keep,
            internal: cfg.internal,
        };
        Stream::from_parts(Arc::new(backing), info)
    }
}

impl<B: Backing> Stream<B> {
    pub(crate) fn set_path(&mut self, path: PathBuf) {
        Arc::make_mut(&mut self.info).path = path;
    }

    pub(crate) fn from_parts(map: Arc<B>, info: StreamInfo) -> Self {
        Stream {
            map,
            info: Arc::new(info),
        }
    }

    /// The stream's static description.
    #[must_use]
    pub fn info(&self) -> &StreamInfo {
        &self.info
    }

    /// Name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// Samples committed so far (absolute count since the stream began).
    #[must_use]
    pub fn written(&self) -> u64 {
        self.map.control().samples.written()
    }

    /// Events pushed so far.
    #[must_use]
    pub fn events_written(&self) -> u64 {
        self.map.control().events.written()
    }

    /// Whether the stream's name still leads to this stream: `false` once the name was
    /// removed (a clean close without [`StreamConfig::keep`], `Stream::remove`) or taken by a
    /// newer stream. Streams without a file (in the heap) are always current.
    #[must_use]
    pub fn is_current(&self) -> bool {
        match self.map.file_id() {
            None => true,
            Some(id) => file_id_at(&self.info.path) == Some(id),
        }
    }

    /// Remove the stream's name if it still leads to this stream (never a newer stream's).
    /// Returns whether it did.
    pub(crate) fn unlink_if_current(&self) -> bool {
        self.map.file_id().is_some()
            && self.is_current()
            && std::fs::remove_file(&self.info.path).is_ok()
    }

    /// Become the stream's one writer. Refused while another live process holds it; a dead
    /// holder (its process is gone) is replaced. Refused too once the stream has ended (its
    /// name removed or taken by a newer stream): a writer there would write to nobody.
    pub fn writer(&self) -> Result<Writer<B>, ClaimError> {
        let owner = &self.map.control().owner;
        let me = ProcessId::current();
        // one compare-and-swap of one word holding pid and start time: never half done
        match claims::claim_writer(&owner.writer, me) {
            claims::WriterClaim::Busy(holder) => {
                return Err(ClaimError::WriterBusy {
                    name: self.info.name.clone(),
                    pid: holder.pid(),
                })
            }
            claims::WriterClaim::Won {
                replaced: Some(dead),
            } => {
                tracing::warn!(stream = %self.info.name, pid = dead.pid(), "replacing the writer of a process that died");
            }
            claims::WriterClaim::Won { replaced: None } => {}
        }
        // Checked after the claim: a replacement claims the old stream's writer before it
        // renames the new one over the name (`create_replacing`), so once we hold the claim
        // the name cannot move to another stream unless it is removed by hand.
        if !self.is_current() {
            claims::release_writer(&owner.writer, me);
            return Err(ClaimError::Ended {
                name: self.info.name.clone(),
            });
        }
        // Publish with the light barrier when sleepers can make this process run the heavy
        // half (`membarrier`; a process's first claim starts registering for it, and the
        // writer fences until that is done, see `Writer::commit`).
        let light = sys::membarrier_registered();
        crate::writer::store_publish_barrier(owner, light);
        // SYNC: Relaxed: statistics and a liveness hint, read without ordering.
        owner.generation.fetch_add(1, Ordering::Relaxed);
        owner
            .heartbeat_ns
            .store(sys::monotonic_ns(), Ordering::Relaxed);
        Ok(Writer::new(self.clone(), me, light))
    }

    /// Register a reader in `mode`, starting at the newest sample (nothing old is pulled;
    /// `seek` to read history). Dead readers' slots are reclaimed when needed.
    pub fn reader(&self, mode: ReaderMode) -> Result<Reader<B>, ClaimError> {
        let slots = &self.map.control().readers;
        let me = ProcessId::current();
        for pass in 0..2 {
            for (i, slot) in slots.iter().enumerate() {
                if claims::claim_slot(&slot.state, me) {
                    return Ok(Reader::new(self.clone(), i, mode, me));
                }
            }
            if pass == 0 {
                self.reclaim_dead_readers();
            }
        }
        Err(ClaimError::NoReaderSlot {
            name: self.info.name.clone(),
            max: MAX_READERS,
        })
    }

    /// Free the slots of readers whose process died; returns how many.
    pub fn reclaim_dead_readers(&self) -> usize {
        let c = self.map.control();
        let mut n = 0;
        for slot in &c.readers {
            let Some((dead, tag)) = claims::reclaim_slot(&slot.state) else {
                continue;
            };
            if tag == slot_state::LOSSLESS {
                // SYNC: Release pairs with the writer's Acquire count check.
                c.stats.lossless_readers.fetch_sub(1, Ordering::Release);
            }
            tracing::warn!(stream = %self.info.name, pid = dead.pid(), "released the slot of a reader whose process died");
            n += 1;
        }
        n
    }
}

/// Device and inode of the file at `path` (not following a symbolic link).
fn file_id_at(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.dev(), m.ino()))
}
