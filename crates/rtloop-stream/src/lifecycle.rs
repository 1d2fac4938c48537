//! A stream's life as the rest of the system shows it, and the one rule that gives an ended
//! stream's memory back.
//!
//! # The rule
//!
//! * A writer that **closes cleanly** removes the stream's name (unless the stream was made
//!   with [`StreamConfig::keep`](crate::StreamConfig::keep)). Readers already attached read
//!   on; the memory comes back when the last of them unmaps it. An ended stream is therefore
//!   never resolved again, and a second run never finds the first one's data.
//! * A stream whose writer **died** is reclaimed by the next [`Stream::create`], listing
//!   ([`Stream::survey`] with reclaiming on, as `rtloop stream list` and
//!   `rtloop.resolve_streams` do) or [`Stream::collect_ended`] (`rtloop stream gc`), which
//!   say what they freed. A kept stream stays until it is removed by hand.
//! * A file left **half made** by a process that died inside `create` (no stream magic yet,
//!   its creator's lock gone) is reclaimed the same way.
//! * A stream that has **no writer yet** is not ended: it waits for one.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

use crate::error::{OpenError, RemoveError};
use crate::layout::{MAGIC, WRITER_WORD_IN_CONTROL};
use crate::shm::stream_path;
use crate::{sys, Liveness, Stream};

/// Where a stream is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    /// A live process holds the writer.
    Live {
        /// The writer's pid.
        pid: u32,
        /// Nanoseconds since its last commit or heartbeat.
        since_heartbeat_ns: u64,
    },
    /// Created, no writer has claimed it yet.
    Waiting {
        /// Who created it.
        creator_pid: u32,
    },
    /// Its writer closed cleanly (the name stays only for a kept stream).
    Closed,
    /// Its writer's process ended without closing.
    Dead {
        /// The writer's pid.
        pid: u32,
    },
    /// The file under the name is not a stream this rtloop can read.
    Damaged {
        /// Why.
        reason: String,
    },
}

impl StreamState {
    /// One word: `live`, `waiting`, `closed`, `dead` or `damaged`.
    #[must_use]
    pub fn word(&self) -> &'static str {
        match self {
            StreamState::Live { .. } => "live",
            StreamState::Waiting { .. } => "waiting",
            StreamState::Closed => "closed",
            StreamState::Dead { .. } => "dead",
            StreamState::Damaged { .. } => "damaged",
        }
    }

    /// Whether the stream has ended (closed, dead or damaged): nothing more will be written.
    #[must_use]
    pub fn ended(&self) -> bool {
        matches!(
            self,
            StreamState::Closed | StreamState::Dead { .. } | StreamState::Damaged { .. }
        )
    }

    /// The state of an open stream: damaged when its shared counters cannot be right
    /// (see [`Stream::damage`]), else its writer's liveness.
    #[must_use]
    pub fn of(stream: &Stream) -> StreamState {
        if let Some(reason) = stream.damage() {
            return StreamState::Damaged { reason };
        }
        match stream.writer_liveness() {
            Liveness::Active {
                pid,
                since_heartbeat_ns,
            } => StreamState::Live {
                pid,
                since_heartbeat_ns,
            },
            Liveness::NoWriter => StreamState::Waiting {
                creator_pid: stream.info().creator_pid,
            },
            Liveness::Closed => StreamState::Closed,
            Liveness::Dead { pid } => StreamState::Dead { pid },
        }
    }
}

impl std::fmt::Display for StreamState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamState::Live { pid, .. } => write!(f, "live (writer pid {pid})"),
            StreamState::Waiting { creator_pid } => {
                write!(f, "waiting for a writer (made by pid {creator_pid})")
            }
            StreamState::Closed => f.write_str("closed"),
            StreamState::Dead { pid } => write!(f, "dead (writer pid {pid} ended without closing)"),
            StreamState::Damaged { reason } => write!(f, "damaged: {reason}"),
        }
    }
}

/// One entry of [`Stream::survey`].
#[derive(Debug)]
pub struct Surveyed {
    /// The stream's name.
    pub name: String,
    /// Its state.
    pub state: StreamState,
    /// The open stream (`None` when damaged).
    pub stream: Option<Stream>,
}

impl Surveyed {
    /// Whether the stream is used inside one rtloop tool (hidden unless asked for).
    #[must_use]
    pub fn internal(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.info().internal)
    }
}

/// One stream given back by [`Stream::collect_ended`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reclaimed {
    /// The stream's name.
    pub name: String,
    /// Bytes of shared memory its file held.
    pub bytes: u64,
    /// Why it was ended: `dead (writer pid N ...)` or `half made ...`.
    pub why: String,
}

/// How long a file without the stream magic may be in the making before it is judged half
/// made (its creator also holds a lock on it while it makes it).
const HALF_MADE_AFTER: Duration = Duration::from_secs(2);

impl Stream {
    /// Every stream in the shared-memory directory with its state, sorted by name. With
    /// `reclaim`, ended streams that nobody keeps are given back on the way (as
    /// [`Stream::collect_ended`] does) and are not in the list but in the second one.
    #[must_use]
    pub fn survey(reclaim: bool) -> (Vec<Surveyed>, Vec<Reclaimed>) {
        let (mut out, mut freed) = (Vec::new(), Vec::new());
        for name in Stream::list() {
            match survey_one(name, reclaim) {
                Some(Ok(e)) => out.push(e),
                Some(Err(r)) => freed.push(r),
                None => {}
            }
        }
        (out, freed)
    }

    /// Give back the memory of every stream of this user that has ended and is not kept: a
    /// dead writer's stream, and a file a crashed `create` left half made. Streams that are
    /// live, wait for a writer, or were made with `keep` stay. Returns what was freed.
    ///
    /// Every `create` runs this, so it maps only the streams whose writer word, read from
    /// the file, names a process that is gone (or that have no magic): a live stream is
    /// never mapped here.
    #[must_use]
    pub fn collect_ended() -> Vec<Reclaimed> {
        Stream::list()
            .into_iter()
            .filter(|name| may_have_ended(&stream_path(name)))
            .filter_map(|name| survey_one(name, true)?.err())
            .collect()
    }

    /// Why this stream's shared counters cannot be right, when they cannot: something other
    /// than its writer wrote into the file. Every writer keeps `written <= reserved <=
    /// written + capacity` for samples and for events, and its writer word is "never",
    /// "closed" or a process; a reader that trusted other counters would show or read
    /// samples that were never written (a count near 10^18, a window far past the ring).
    #[must_use]
    pub fn damage(&self) -> Option<String> {
        let c = self.map.control();
        let info = self.info();
        let ring = |what: &str, sync: &crate::ring::RingSync, capacity: u64| {
            // `written`, then `reserved`, then `written` again: with a live writer moving
            // both, the first pair is ordered one way and the second the other
            let before = sync.written();
            let reserved = sync.reserved();
            let after = sync.written();
            if reserved < before {
                Some(format!(
                    "its {what} counters cannot be right: {reserved} reserved is below {before} written"
                ))
            } else if reserved.saturating_sub(after) > capacity {
                Some(format!(
                    "its {what} counters cannot be right: {reserved} reserved is more than its capacity of {capacity} ahead of {after} written"
                ))
            } else {
                None
            }
        };
        // SYNC: Relaxed: the word's value is judged on its own.
        let word = c.owner.writer.load(crate::sync::Ordering::Relaxed);
        let writer_ok = word == crate::layout::writer_word::NEVER
            || word == crate::layout::writer_word::CLOSED
            || sys::ProcessId::from_word(word).is_some();
        if !writer_ok {
            return Some(format!(
                "its writer word {word:#x} is neither a process nor \"never\" nor \"closed\""
            ));
        }
        ring("sample", &c.samples, info.capacity)
            .or_else(|| ring("event", &c.events, info.event_capacity))
    }

    /// Where in the stream's file its samples' `written` counter sits: tests write there from
    /// another process, as a stray writer into `/dev/shm` would, to make a damaged stream.
    #[doc(hidden)]
    #[cfg(not(loom))]
    #[must_use]
    pub fn samples_written_file_offset(&self) -> u64 {
        self.map.header().control_offset + crate::layout::SAMPLES_WRITTEN_IN_CONTROL as u64
    }

    /// Whether the file under `name` is one a crashed `create` left half made (no magic, no
    /// creator holding it): such a file is removable by [`Stream::remove`] and replaceable.
    #[must_use]
    pub fn is_half_made(name: &str) -> bool {
        crate::layout::validate_name(name).is_ok() && half_made(&stream_path(name))
    }
}

/// One stream of a survey: `Ok` listed, `Err` reclaimed (with `reclaim`), `None` gone meanwhile.
fn survey_one(name: String, reclaim: bool) -> Option<Result<Surveyed, Reclaimed>> {
    let path = stream_path(&name);
    match Stream::open(&name) {
        Ok(s) => {
            let state = StreamState::of(&s);
            // judged on the writer alone: a damaged stream of a dead writer comes back too
            if let (true, false, Liveness::Dead { pid }) =
                (reclaim, s.info().keep, s.writer_liveness())
            {
                let bytes = s.info().file_bytes;
                // judged again right before removing: a new writer may have replaced the
                // dead one meanwhile
                if matches!(s.writer_liveness(), Liveness::Dead { .. }) && s.unlink_if_current() {
                    return Some(Err(Reclaimed {
                        name,
                        bytes,
                        why: format!("dead (writer pid {pid} ended without closing)"),
                    }));
                }
            }
            Some(Ok(Surveyed {
                name,
                state,
                stream: Some(s),
            }))
        }
        Err(OpenError::NotFound { .. }) => None, // removed meanwhile
        Err(e) => {
            if reclaim && half_made(&path) {
                let bytes = std::fs::symlink_metadata(&path).map_or(0, |m| m.len());
                if std::fs::remove_file(&path).is_ok() {
                    return Some(Err(Reclaimed {
                        name,
                        bytes,
                        why: "half made (its creator ended inside create)".to_owned(),
                    }));
                }
            }
            Some(Ok(Surveyed {
                name,
                state: StreamState::Damaged {
                    reason: damage_reason(&e),
                },
                stream: None,
            }))
        }
    }
}

/// Whether the stream file at `path` may have ended without a close, judged from two reads
/// of the file: its magic, and the writer word naming a process that is gone. A file
/// without the magic may be half made. A hint: the full judgement maps the stream.
fn may_have_ended(path: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let mut head = [0u8; 8];
    if file.read_exact_at(&mut head, 0).is_err() || head != MAGIC {
        return true;
    }
    let mut off = [0u8; 8];
    let at = std::mem::offset_of!(crate::layout::Header, control_offset) as u64;
    if file.read_exact_at(&mut off, at).is_err() {
        return true;
    }
    let mut word = [0u8; 8];
    let at = u64::from_ne_bytes(off).saturating_add(WRITER_WORD_IN_CONTROL as u64);
    if file.read_exact_at(&mut word, at).is_err() {
        return true;
    }
    sys::ProcessId::from_word(u64::from_ne_bytes(word)).is_some_and(|holder| !holder.alive())
}

/// A file of this user without the stream magic, not locked by a creator and older than
/// [`HALF_MADE_AFTER`].
fn half_made(path: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    else {
        return false;
    };
    let Ok(meta) = file.metadata() else {
        return false;
    };
    if !meta.is_file() || meta.uid() != rustix::process::geteuid().as_raw() {
        return false;
    }
    let mut magic = [0u8; 8];
    let read = std::os::unix::fs::FileExt::read_at(&file, &mut magic, 0).unwrap_or(0);
    if read == 8 && magic == MAGIC {
        return false;
    }
    if magic.iter().any(|&b| b != 0) {
        return false; // somebody else's bytes: not ours to judge
    }
    let age = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .unwrap_or_default();
    // a creator holds an exclusive lock while it makes the file
    age >= HALF_MADE_AFTER
        && rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
}

fn damage_reason(e: &OpenError) -> String {
    match e {
        OpenError::NotAStream { reason, .. } | OpenError::Refused { reason, .. } => reason.clone(),
        OpenError::LayoutVersion {
            found, expected, ..
        } => format!(
            "it was made by another rtloop (stream layout {found}; this rtloop reads layout {expected}); remove it with `rtloop stream remove`"
        ),
        other => other.to_string(),
    }
}

/// Whether process `pid` exists (any start time).
pub(crate) fn pid_alive(pid: u32) -> bool {
    pid != 0 && sys::process_alive(pid, 0)
}

/// [`Stream::remove`] for a half-made file: it has no magic, so the magic check refuses it.
pub(crate) fn remove_half_made(name: &str) -> Result<(), RemoveError> {
    let path = stream_path(name);
    if half_made(&path) {
        std::fs::remove_file(&path).map_err(|source| RemoveError::Io { path, source })
    } else {
        Err(RemoveError::NotFound {
            name: name.to_owned(),
        })
    }
}
