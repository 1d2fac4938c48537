//! Readers: any number, any process. Latest-wins (the writer never waits; a lapped reader is
//! told exactly how much it lost) or lossless (the writer waits for it).

use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use crate::backing::{as_uninit, Backing};
use crate::claims;
use crate::error::{ReadError, WaitError};
use crate::events::Event;
use crate::layout::{publish_barrier, writer_word, EVENT_SLOT_BYTES};
use crate::ring::{self, slot_state, WindowCheck};
use crate::stream::DefaultBacking;
use crate::sync::{fence, heavy_barrier, Ordering};
use crate::sys::ProcessId;
use crate::{sys, Stream, StreamInfo};
#[cfg(not(loom))]
use crate::{Sample, SharedMemory};
#[cfg(not(loom))]
use std::sync::Arc;

/// How a reader relates to the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReaderMode {
    /// The writer never waits; a reader that falls behind gets [`ReadError::Overrun`].
    Latest,
    /// The writer waits (up to its timeout) until this reader has consumed a sample
    /// before overwriting it. A reader whose process dies is released.
    Lossless,
}

impl std::str::FromStr for ReaderMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "latest" => Ok(ReaderMode::Latest),
            "lossless" => Ok(ReaderMode::Lossless),
            _ => Err(format!(
                "unknown reader mode {s:?}; allowed: latest, lossless"
            )),
        }
    }
}

/// The state of a stream's writer as seen by a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// No writer ever opened the stream.
    NoWriter,
    /// A writer holds the stream; `since_heartbeat_ns` since its last commit or heartbeat.
    Active {
        /// Writer pid.
        pid: u32,
        /// Nanoseconds since its last commit or heartbeat.
        since_heartbeat_ns: u64,
    },
    /// The last writer closed cleanly.
    Closed,
    /// The writer's process is gone without closing.
    Dead {
        /// Its pid.
        pid: u32,
    },
}

/// What one pull delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pulled {
    /// Index of the first sample delivered.
    pub first: u64,
    /// Samples delivered.
    pub n: usize,
}

/// A registered reader of a stream.
pub struct Reader<B: Backing = DefaultBacking> {
    stream: Stream<B>,
    slot: usize,
    mode: ReaderMode,
    cursor: u64,
    event_cursor: u64,
    high_water_seen: u64,
    spin: Duration,
    /// Our slot word (holder and state): freeing compares against it.
    word: u64,
    /// Publish the cursor with the light barrier (see `ReaderCursor::release_to`).
    light: bool,
    /// Cursor publications while not light (to look at the registration now and then).
    cursor_moves: u32,
    /// [`sys::fork_generation`] when this reader registered: a forked child's copy of the
    /// handle neither reads through it nor frees the parent's slot.
    fork_generation: u64,
}

impl<B: Backing> std::fmt::Debug for Reader<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("stream", &self.stream.name())
            .field("mode", &self.mode)
            .field("cursor", &self.cursor)
            .finish()
    }
}

/// A zero-copy window of samples `[first, end)`: one contiguous region of the shared mapping
/// (kept alive by this value). In latest-wins mode the writer may overwrite it once it is
/// more than `capacity` samples behind: call [`Window::check`] after using the data.
///
/// Only [`Reader::window`] and [`Reader::latest`] make windows, and only of committed,
/// kept samples; the range cannot be changed afterwards (a wider range would reach past the
/// mapping, or into samples the writer is still filling):
///
/// ```compile_fail,E0616
/// fn widen(w: &mut rtloop_stream::Window) {
///     w.end += 10_000;
/// }
/// ```
#[cfg(not(loom))]
#[derive(Clone)]
pub struct Window {
    map: Arc<SharedMemory>,
    first: u64,
    end: u64,
}

#[cfg(not(loom))]
impl std::fmt::Debug for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Window")
            .field("first", &self.first)
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

#[cfg(not(loom))]
impl Window {
    /// First sample.
    #[must_use]
    pub fn first(&self) -> u64 {
        self.first
    }

    /// One past the last sample.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Pointer to the first byte (valid while this `Window` lives).
    #[must_use]
    pub fn as_ptr(&self) -> *const u8 {
        crate::ZeroCopy::sample_ptr(&*self.map, self.first)
    }

    /// Bytes in the window.
    #[must_use]
    pub fn len_bytes(&self) -> usize {
        (self.end - self.first) as usize * self.map.sample_bytes()
    }

    /// Samples in the window.
    #[must_use]
    pub fn len(&self) -> usize {
        (self.end - self.first) as usize
    }

    /// Whether the window is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.end == self.first
    }

    /// The bytes, in place (zero-copy).
    ///
    /// # Safety
    ///
    /// They are shared memory the writer stores to once it laps this window. The caller
    /// must make sure the writer does not store to these samples while the slice is in use:
    /// a *lossless* reader's window at or after its cursor is safe (the writer waits for the
    /// cursor); for any other window, use the data only as a speculative read that is
    /// discarded unless [`Window::check`] succeeds afterwards (the seqlock pattern; the racy
    /// contents are then never acted on). Handing the slice to the kernel (a `write` or
    /// `send` that copies it) is such a read when what was sent counts only if
    /// [`Window::check`] succeeds after the call returned: a server holds back the end of
    /// its message until then, and closes the connection instead if the check fails. When
    /// in doubt, use [`Window::copy_to`] or [`Window::to_vec`], which copy and validate.
    ///
    /// The slice is one piece even where the window wraps around the ring's end: the data
    /// region is mapped twice back to back.
    #[must_use]
    pub unsafe fn bytes(&self) -> &[u8] {
        // SAFETY: the window lies inside the doubled data mapping, which `self.map` keeps
        // mapped; the caller upholds the contract above on concurrent stores.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len_bytes()) }
    }

    /// The values in place, if `T` is the stream's dtype (see [`Window::bytes`]).
    ///
    /// # Safety
    ///
    /// As [`Window::bytes`]; `T` is the stream's dtype (checked by [`Reader::window_as`]).
    unsafe fn values<T: Sample>(&self) -> &[T] {
        // SAFETY: the caller upholds `bytes`' contract.
        let b = unsafe { self.bytes() };
        // SAFETY: aligned (page-aligned base, offsets multiples of the itemsize) and a whole
        // number of T, which is plain old data.
        unsafe {
            std::slice::from_raw_parts(b.as_ptr().cast::<T>(), b.len() / std::mem::size_of::<T>())
        }
    }

    /// A validated copy of the window's bytes.
    pub fn to_vec(&self) -> Result<Vec<u8>, ReadError> {
        let mut out = vec![0u8; self.len_bytes()];
        self.copy_to(&mut out)?;
        Ok(out)
    }

    /// Copy the window into `out` (exactly [`Window::len_bytes`] long) and check it
    /// afterwards: `Ok` means `out` holds the samples written at these indices.
    pub fn copy_to(&self, out: &mut [u8]) -> Result<(), ReadError> {
        if out.len() != self.len_bytes() {
            return Err(ReadError::BufferSize {
                needed: self.len_bytes(),
                got: out.len(),
            });
        }
        // The range is checked again here, where the copy happens, not only when the window
        // was made: it must lie below `written` (never in `[written, reserved)`, slots the
        // writer may be filling) and at most `capacity` long (else it reaches past the
        // doubled mapping). A window already lapped is an overrun, as `check` says.
        let c = self.map.control();
        let cap = self.map.capacity();
        match ring::check_window(
            self.first,
            self.end,
            c.samples.written(),
            c.samples.reserved(),
            cap,
        ) {
            WindowCheck::Ok => {}
            WindowCheck::Overwritten { oldest } => return Err(self.overrun(oldest)),
            other => return Err(window_error(other, self.first, self.end, cap)),
        }
        // a concurrent store by the writer may tear what we copy, which `check` below
        // detects (the copy is validated after, seqlock style)
        self.map.load_samples(self.first, out);
        self.check()
    }

    fn overrun(&self, oldest: u64) -> ReadError {
        ReadError::Overrun {
            lost: oldest.saturating_sub(self.first).min(self.end - self.first),
            oldest,
        }
    }

    /// Samples the writer may still reserve before it may store into the window's first
    /// sample (0: it may have begun). A window whose bytes are handed to the kernel in
    /// place (see [`Window::bytes`]) is checked only after the kernel took them, so a
    /// sender takes that path only while this is large.
    #[must_use]
    pub fn headroom(&self) -> u64 {
        let c = self.map.control();
        (self.first + self.map.capacity()).saturating_sub(c.samples.reserved())
    }

    /// Was the window intact until now? `Err(Overrun)` if the writer may have overwritten
    /// part of it.
    pub fn check(&self) -> Result<(), ReadError> {
        self.map
            .control()
            .samples
            .validate_after_copy(self.first, self.map.capacity())
            .map_err(|oldest| self.overrun(oldest))
    }
}

/// A typed zero-copy window (see [`Window`]). Its window cannot be swapped for another
/// (one of another dtype would be read as `T`):
///
/// ```compile_fail,E0616
/// fn swap(t: &mut rtloop_stream::TypedWindow<f32>, w: rtloop_stream::Window) {
///     t.window = w;
/// }
/// ```
#[cfg(not(loom))]
pub struct TypedWindow<T: Sample> {
    window: Window,
    _t: std::marker::PhantomData<T>,
}

#[cfg(not(loom))]
impl<T: Sample> TypedWindow<T> {
    /// The untyped window.
    #[must_use]
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// First sample.
    #[must_use]
    pub fn first(&self) -> u64 {
        self.window.first
    }

    /// One past the last sample.
    #[must_use]
    pub fn end(&self) -> u64 {
        self.window.end
    }

    /// Samples in the window.
    #[must_use]
    pub fn len(&self) -> usize {
        self.window.len()
    }

    /// Whether the window is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.window.is_empty()
    }

    /// Was the window intact until now? See [`Window::check`].
    pub fn check(&self) -> Result<(), ReadError> {
        self.window.check()
    }

    /// The values in place, sample-major (`len * n_channels`), zero-copy.
    ///
    /// # Safety
    ///
    /// As [`Window::bytes`]: the writer must not store to these samples while the slice is
    /// in use (a lossless reader's window), or the values are only a speculative read to be
    /// discarded unless [`Window::check`] succeeds afterwards.
    #[must_use]
    pub unsafe fn values(&self) -> &[T] {
        // SAFETY: the caller upholds the contract; `T` is the dtype (`window_as` checked it).
        unsafe { self.window.values() }
    }

    /// A validated copy of the values.
    pub fn to_vec(&self) -> Result<Vec<T>, ReadError> {
        let mut out = vec![T::default(); self.window.len_bytes() / std::mem::size_of::<T>()];
        // SAFETY: `out` is a Vec of plain-old-data T; viewing its storage as bytes of the
        // same length is sound, and any byte pattern is a valid T.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(
                out.as_mut_ptr().cast::<u8>(),
                std::mem::size_of_val(out.as_slice()),
            )
        };
        self.window.copy_to(bytes)?;
        Ok(out)
    }
}

impl<B: Backing> Reader<B> {
    /// A reader in `slot`, which [`claims::claim_slot`] took for `me` (state CLAIMING).
    pub(crate) fn new(stream: Stream<B>, slot: usize, mode: ReaderMode, me: ProcessId) -> Self {
        // A lossless reader's cursor store needs no fence when the writer can make this
        // process run one before it sleeps for room (`membarrier`; the first call starts
        // the process's registration on a thread of its own, see `publish_cursor`).
        let light = mode == ReaderMode::Lossless && sys::membarrier_registered();
        let c = stream.map.control();
        let s = &c.readers[slot];
        let mut cursor = c.samples.written();
        // SYNC: Relaxed: these are published by the Release store of the slot word below.
        s.cursor.store(cursor, Ordering::Relaxed);
        s.lost.store(0, Ordering::Relaxed);
        s.overruns.store(0, Ordering::Relaxed);
        let tag = match mode {
            ReaderMode::Latest => slot_state::LATEST,
            ReaderMode::Lossless => slot_state::LOSSLESS,
        };
        // publishes the cursor; pairs with the Acquire of the slot word in
        // `min_lossless_cursor` and `reclaim_dead_readers`
        let word = claims::activate_slot(&s.state, me, tag);
        if mode == ReaderMode::Lossless {
            // SYNC: Release pairs with the writer's Acquire in `wait_for_room`: it then scans
            // the slots and finds ours.
            c.stats.lossless_readers.fetch_add(1, Ordering::Release);
            // SYNC: SeqCst fence pairs with the one in `RingSync::publish`, which the writer
            // passes between every commit and its next reservation's count check. Either a
            // reservation saw our registration, or it began before the writer's last fence
            // that precedes ours — and then the `written` we load below is at least that
            // reservation's start, so starting there, nothing unread can be overwritten.
            fence(Ordering::SeqCst);
            // A light writer passes no fence between its commits and the count check: make
            // its CPU run one now (`membarrier`). Either its reservation saw us, or its last
            // `written` store is visible to the load below. SYNC: Relaxed: ordered by our
            // fence above and the fence after a claim stores the word.
            if c.owner.publish_barrier.load(Ordering::Relaxed) == publish_barrier::LIGHT {
                // refused (a seccomp filter): heavy_barrier warns; reads of copies are still
                // validated, so a lost race shows as an overrun, never as wrong data
                let _ = heavy_barrier();
            }
            cursor = c.samples.written();
            // a writer that judged room by our first, lower cursor may be asleep waiting for
            // us: wake it (found by the registration model; before, it slept until its next
            // 10 ms timeout slice)
            if c.readers[slot].release_to(cursor, &c.samples, true, light) {
                c.samples.space_wake.seq.wake_all();
            }
        }
        let event_cursor = c.events.written();
        Reader {
            stream,
            slot,
            mode,
            cursor,
            event_cursor,
            high_water_seen: 0,
            spin: Duration::from_micros(20),
            word,
            light,
            cursor_moves: 0,
            fork_generation: sys::fork_generation(),
        }
    }

    /// Refuse a forked child's copy of this reader: the slot belongs to the parent.
    fn check_owner(&self) -> Result<(), ReadError> {
        if sys::fork_generation() == self.fork_generation {
            Ok(())
        } else {
            Err(ReadError::ForkedCopy {
                name: self.stream.name().to_owned(),
            })
        }
    }

    /// The stream's description.
    #[must_use]
    pub fn info(&self) -> &StreamInfo {
        self.stream.info()
    }

    /// The stream.
    #[must_use]
    pub fn stream(&self) -> &Stream<B> {
        &self.stream
    }

    /// This reader's mode.
    #[must_use]
    pub fn mode(&self) -> ReaderMode {
        self.mode
    }

    /// Next sample `pull` will deliver.
    #[must_use]
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Samples committed so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.stream.map.control().samples.written()
    }

    /// Samples waiting to be pulled.
    #[must_use]
    pub fn available(&self) -> u64 {
        self.written().saturating_sub(self.cursor)
    }

    /// How long `wait` spins before it sleeps on the futex (default 20 µs).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Move the cursor (for example back into history, or to skip ahead up to `written`). A
    /// lossless reader moved back may find the history already overwritten (reported as
    /// overrun). A sample not written yet is refused ([`ReadError::SeekBeyondWritten`]): to
    /// start there, [`Reader::wait`] for it first.
    pub fn seek(&mut self, sample: u64) -> Result<(), ReadError> {
        self.check_owner()?;
        // `written` never decreases, so a cursor at or below it now stays there
        let written = self.written();
        if sample > written {
            return Err(ReadError::SeekBeyondWritten { sample, written });
        }
        self.cursor = sample;
        self.publish_cursor();
        Ok(())
    }

    /// The oldest sample the stream still keeps (where a reader starting at the oldest
    /// begins).
    #[must_use]
    pub fn oldest(&self) -> u64 {
        let c = self.stream.map.control();
        let cap = self.stream.info().capacity;
        ring::oldest_kept(c.samples.reserved(), cap).min(c.samples.written())
    }

    /// Move the event cursor ([`Reader::pull_events`] goes on from event `event`).
    pub fn seek_events(&mut self, event: u64) -> Result<(), ReadError> {
        self.check_owner()?;
        self.event_cursor = event;
        Ok(())
    }

    /// The oldest event the stream still keeps.
    #[must_use]
    pub fn oldest_event(&self) -> u64 {
        let c = self.stream.map.control();
        let cap = self.stream.info().event_capacity;
        ring::oldest_kept(c.events.reserved(), cap).min(c.events.written())
    }

    fn publish_cursor(&mut self) {
        let lossless = self.mode == ReaderMode::Lossless;
        if lossless && !self.light {
            // the process's registration for `membarrier` finishes on a thread of its own
            // after we started: look again now and then, and go light once it is done
            self.cursor_moves = self.cursor_moves.wrapping_add(1);
            if self.cursor_moves % 1024 == 0 {
                self.light = sys::membarrier_registered();
            }
        }
        let c = self.stream.map.control();
        if c.readers[self.slot].release_to(self.cursor, &c.samples, lossless, self.light) {
            c.samples.space_wake.seq.wake_all();
        }
    }

    fn overrun(&mut self, oldest: u64) -> ReadError {
        let lost = oldest - self.cursor;
        let c = self.stream.map.control();
        // SYNC: Relaxed: statistics counters, read without ordering.
        c.stats.overruns.fetch_add(1, Ordering::Relaxed);
        c.stats.lost_samples.fetch_add(lost, Ordering::Relaxed);
        let s = &c.readers[self.slot];
        s.overruns.fetch_add(1, Ordering::Relaxed);
        s.lost.fetch_add(lost, Ordering::Relaxed);
        tracing::debug!(stream = %self.stream.name(), lost, oldest, "reader overrun");
        self.cursor = oldest;
        self.publish_cursor();
        ReadError::Overrun { lost, oldest }
    }

    /// Copy up to `max_samples` of the next samples into `out` (and their CLOCK_MONOTONIC
    /// stamps into `stamps`, if given) and advance. Never blocks; 0 samples when none are
    /// waiting. A lapped reader gets [`ReadError::Overrun`] with the exact loss and
    /// continues from the oldest kept sample on the next call.
    pub fn pull_into(
        &mut self,
        out: &mut [u8],
        stamps: Option<&mut [u64]>,
        max_samples: usize,
    ) -> Result<Pulled, ReadError> {
        self.check_owner()?;
        let info = self.stream.info();
        let (sb, cap) = (info.sample_bytes, info.capacity);
        let c = self.stream.map.control();
        let written = c.samples.written();
        let oldest = ring::oldest_kept(c.samples.reserved(), cap);
        if self.cursor < oldest {
            return Err(self.overrun(oldest));
        }
        // `seek` keeps the cursor at or below `written`; saturating all the same, so a
        // cursor ahead of it can only mean nothing to pull
        let mut n = written
            .saturating_sub(self.cursor)
            .min(max_samples as u64)
            .min((out.len() / sb) as u64);
        if let Some(s) = &stamps {
            n = n.min(s.len() as u64);
        }
        let first = self.cursor;
        if n == 0 {
            return Ok(Pulled { first, n: 0 });
        }
        let copied = copy_out(
            &*self.stream.map,
            first,
            first + n,
            as_uninit(&mut out[..n as usize * sb]),
            stamps,
        );
        if let Err(e) = copied {
            return Err(match e {
                // lapped during the copy, or between the check above and the copy's own
                // (TooOld): either way an overrun with the exact loss, never an error
                ReadError::Overrun { oldest, .. } | ReadError::TooOld { oldest, .. } => {
                    self.overrun(oldest)
                }
                other => other,
            });
        }
        let occ = written - first;
        if occ > self.high_water_seen {
            self.high_water_seen = occ;
            // SYNC: Relaxed: statistics.
            self.stream
                .map
                .control()
                .stats
                .high_water
                .fetch_max(occ, Ordering::Relaxed);
        }
        self.cursor = first + n;
        self.publish_cursor();
        Ok(Pulled {
            first,
            n: n as usize,
        })
    }

    /// Copy samples `[first, end)` (and stamps) into `out`, validated; the cursor does not
    /// move. For a lapped window: [`ReadError::Overrun`] if it was overwritten during the
    /// copy, [`ReadError::TooOld`] if it was already gone.
    pub fn read_into(
        &self,
        first: u64,
        end: u64,
        out: &mut [u8],
        stamps: Option<&mut [u64]>,
    ) -> Result<(), ReadError> {
        let sb = self.stream.info().sample_bytes;
        self.check_owner()?;
        let needed = (end.saturating_sub(first)) as usize * sb;
        if out.len() != needed {
            return Err(ReadError::BufferSize {
                needed,
                got: out.len(),
            });
        }
        copy_out(&*self.stream.map, first, end, as_uninit(out), stamps)
    }

    /// Copy the stamps (CLOCK_MONOTONIC ns) of samples `[first, end)`, validated like
    /// [`Reader::read_into`]: the timestamps of a zero-copy window without copying its
    /// samples.
    pub fn read_stamps(&self, first: u64, end: u64, stamps: &mut [u64]) -> Result<(), ReadError> {
        self.check_owner()?;
        let needed = end.saturating_sub(first) as usize;
        if stamps.len() != needed {
            return Err(ReadError::BufferSize {
                needed: needed * 8,
                got: stamps.len() * 8,
            });
        }
        copy_out(&*self.stream.map, first, end, &mut [], Some(stamps))
    }

    /// Turn the commit stamps of samples `[end - stamps.len(), end)` (as copied by
    /// [`Reader::read_into`], [`Reader::pull_into`] or [`Reader::read_stamps`]) into each
    /// sample's own time, as liblsl does for a chunk: in a stream with a nominal rate, the
    /// last sample of a commit keeps the commit's stamp and each earlier one is back-dated by
    /// one sample period per sample after it. A commit is a run of equal stamps; the ring
    /// keeps one stamp per commit, so its end is looked up past `end` when the run reaches
    /// it. Irregular streams (rate 0) keep the commit's stamp for every sample.
    pub fn sample_times(&self, end: u64, stamps: &mut [u64]) {
        let rate = self.stream.info().nominal_rate;
        if rate.is_nan() || rate <= 0.0 || stamps.is_empty() {
            return;
        }
        let last = stamps[stamps.len() - 1];
        let tail = self.commit_tail(end, last);
        back_date(stamps, tail, 1e9 / rate);
    }

    /// How many samples from `end` on share the stamp `stamp` (the rest of the commit that
    /// sample `end - 1` belongs to). Commits publish whole, so the run ends before
    /// `written`; if the writer laps those samples meanwhile, what was read counts.
    fn commit_tail(&self, end: u64, stamp: u64) -> u64 {
        const STEP: u64 = 64;
        let mut at = end;
        let mut buf = [0u64; STEP as usize];
        loop {
            let upto = (at + STEP).min(self.written());
            if upto <= at {
                return at - end;
            }
            let got = &mut buf[..(upto - at) as usize];
            if copy_out(&*self.stream.map, at, upto, &mut [], Some(got)).is_err() {
                return at - end;
            }
            match got.iter().position(|&s| s != stamp) {
                Some(k) => return at + k as u64 - end,
                None => at = upto,
            }
        }
    }

    /// Block until at least `until` samples were written (spin briefly, then sleep on the
    /// futex); `None` waits forever. Returns `written`. A dead writer ends the wait.
    pub fn wait(&self, until: u64, timeout: Option<Duration>) -> Result<u64, WaitError> {
        if sys::fork_generation() != self.fork_generation {
            return Err(WaitError::ForkedCopy {
                name: self.stream.name().to_owned(),
            });
        }
        wait_until(&self.stream, until, timeout, self.spin)
    }

    /// Block until `n` samples are waiting to be pulled.
    pub fn wait_available(&self, n: u64, timeout: Option<Duration>) -> Result<u64, WaitError> {
        self.wait(self.cursor + n, timeout)
    }

    /// The writer's state.
    #[must_use]
    pub fn writer_liveness(&self) -> Liveness {
        liveness(&self.stream)
    }

    /// Events pushed so far.
    #[must_use]
    pub fn events_written(&self) -> u64 {
        self.stream.map.control().events.written()
    }

    /// Events `[first, end)` by index, validated.
    pub fn read_events(&self, first: u64, end: u64) -> Result<Vec<Event>, ReadError> {
        read_events(&self.stream, first, end)
    }

    /// Events pushed since the last call (or since this reader registered).
    pub fn pull_events(&mut self) -> Result<Vec<Event>, ReadError> {
        self.check_owner()?;
        let end = self.events_written();
        match read_events(&self.stream, self.event_cursor, end) {
            Ok(v) => {
                self.event_cursor = end;
                Ok(v)
            }
            Err(ReadError::TooOld { oldest, .. } | ReadError::Overrun { oldest, .. }) => {
                let lost = oldest - self.event_cursor;
                self.event_cursor = oldest;
                Err(ReadError::Overrun { lost, oldest })
            }
            Err(e) => Err(e),
        }
    }
}

fn window_error(check: WindowCheck, first: u64, end: u64, capacity: u64) -> ReadError {
    match check {
        WindowCheck::Reversed => ReadError::Reversed { first, end },
        WindowCheck::NotYetWritten { written } => ReadError::NotYetWritten {
            first,
            end,
            written,
        },
        WindowCheck::Overwritten { oldest } => ReadError::TooOld {
            first,
            end,
            oldest,
            capacity,
        },
        WindowCheck::Ok => unreachable!("not an error"),
    }
}

/// Back-date runs of equal stamps (one commit each) by `period_ns` per sample after each
/// sample in its run; the last run goes on for `tail` samples past the slice.
fn back_date(stamps: &mut [u64], tail: u64, period_ns: f64) {
    let mut after = tail;
    let mut next: Option<u64> = None; // the commit stamp of the sample after this one
    for s in stamps.iter_mut().rev() {
        let stamp = *s;
        if next.is_some_and(|n| n != stamp) {
            after = 0;
        }
        *s = stamp.saturating_sub((after as f64 * period_ns).round() as u64);
        next = Some(stamp);
        after += 1;
    }
}

/// A validated copy out of a stream (shared by readers and the stream handle). On `Ok`
/// every byte of `out` has been set (it may be memory that never was).
fn copy_out<B: Backing>(
    map: &B,
    first: u64,
    end: u64,
    out: &mut [MaybeUninit<u8>],
    stamps: Option<&mut [u64]>,
) -> Result<(), ReadError> {
    let c = map.control();
    let cap = map.capacity();
    let written = c.samples.written();
    match ring::check_window(first, end, written, c.samples.reserved(), cap) {
        WindowCheck::Ok => {}
        other => return Err(window_error(other, first, end, cap)),
    }
    let sb = map.sample_bytes();
    if end == first + 1 && end == written && sb <= ring::INLINE_BYTES && out.len() == sb {
        // the newest sample, small: from the publish line if it still holds it intact
        let mut words = [0u64; ring::INLINE_WORDS];
        if let Some(stamp) = c.samples.load_inline(end, &mut words[..sb.div_ceil(8)]) {
            for (d, &b) in out
                .iter_mut()
                .zip(&crate::writer::words_as_bytes(&mut words)[..sb])
            {
                d.write(b);
            }
            if let Some(st) = stamps {
                st[0] = stamp;
            }
            return Ok(());
        }
    }
    if !out.is_empty() {
        map.load_samples_uninit(first, out);
    }
    if let Some(st) = stamps {
        for (k, i) in (first..end).enumerate() {
            // racy with the writer like the samples, and validated below with them
            st[k] = map.load_stamp(i);
        }
    }
    c.samples
        .validate_after_copy(first, cap)
        .map_err(|oldest| ReadError::Overrun {
            lost: oldest - first,
            oldest,
        })
}

pub(crate) fn read_events<B: Backing>(
    stream: &Stream<B>,
    first: u64,
    end: u64,
) -> Result<Vec<Event>, ReadError> {
    let map = &stream.map;
    let sync = &map.control().events;
    let cap = map.event_capacity();
    match ring::check_window(first, end, sync.written(), sync.reserved(), cap) {
        WindowCheck::Ok => {}
        other => return Err(window_error(other, first, end, cap)),
    }
    let mut slot = [0u8; EVENT_SLOT_BYTES];
    let mut out = Vec::with_capacity((end - first) as usize);
    for i in first..end {
        // racy with the writer and validated right after
        map.load_event(i, &mut slot);
        sync.validate_after_copy(i, cap)
            .map_err(|oldest| ReadError::Overrun {
                lost: oldest - first,
                oldest,
            })?;
        out.push(Event::decode(&slot).map_err(|reason| ReadError::BadEvent { index: i, reason })?);
    }
    Ok(out)
}

pub(crate) fn liveness<B: Backing>(stream: &Stream<B>) -> Liveness {
    let o = &stream.map.control().owner;
    // SYNC: Acquire pairs with the writer's Release of the word at claim and close.
    let word = o.writer.load(Ordering::Acquire);
    let Some(holder) = ProcessId::from_word(word) else {
        return if word == writer_word::NEVER {
            Liveness::NoWriter
        } else {
            Liveness::Closed
        };
    };
    if !holder.alive() {
        return Liveness::Dead { pid: holder.pid() };
    }
    // SYNC: Relaxed: a liveness hint, judged on its own.
    let hb = o.heartbeat_ns.load(Ordering::Relaxed);
    Liveness::Active {
        pid: holder.pid(),
        since_heartbeat_ns: sys::monotonic_ns().saturating_sub(hb),
    }
}

/// How often a blocked reader checks that the writer's process is still alive.
/// (Under loom, never: a model must not depend on how much real time passed.)
const LIVENESS_SLICE: Duration = if cfg!(loom) {
    Duration::from_secs(86_400)
} else {
    Duration::from_millis(100)
};

/// The end of a wait for sample `until` if the writer closed cleanly (it writes nothing more):
/// `Ok` when everything up to `until` is there, else `WriterClosed`. `None` while it is open.
fn ended_by_close(
    owner: &crate::layout::OwnerLine,
    sync: &ring::RingSync,
    until: u64,
) -> Option<Result<u64, WaitError>> {
    // SYNC: Acquire pairs with the Release of the word at close: the `written` loaded after it
    // holds every commit of the closed writer.
    if owner.writer.load(Ordering::Acquire) != writer_word::CLOSED {
        return None;
    }
    let w = sync.written();
    Some(if w >= until {
        Ok(w)
    } else {
        Err(WaitError::WriterClosed { written: w })
    })
}

pub(crate) fn wait_until<B: Backing>(
    stream: &Stream<B>,
    until: u64,
    timeout: Option<Duration>,
    spin: Duration,
) -> Result<u64, WaitError> {
    let sync = &stream.map.control().samples;
    let w = sync.written();
    if w >= until {
        return Ok(w);
    }
    let owner = &stream.map.control().owner;
    if timeout == Some(Duration::ZERO) {
        // A poll never sleeps, so it does not announce itself as a sleeper: a reader polling
        // in a loop would otherwise keep the waiter count non-zero, and the writer would pay a
        // futex wake system call for commits nobody sleeps through.
        if let Some(ended) = ended_by_close(owner, sync, until) {
            return ended;
        }
        let w = sync.written();
        return if w >= until {
            Ok(w)
        } else {
            Err(WaitError::Timeout { until, written: w })
        };
    }
    let started = Instant::now();
    let deadline = timeout.map(|t| started + t);
    let spin_budget = timeout.map_or(spin, |t| t.min(spin));
    // spin, reading the clock only every 64 polls
    while started.elapsed() < spin_budget {
        for _ in 0..64 {
            let w = sync.written();
            if w >= until {
                return Ok(w);
            }
            crate::sync::spin_hint();
        }
    }
    let announced = sync.announce_data_waiter(&owner.publish_barrier);
    let mut seq = announced.seq;
    // the writer's liveness costs system calls and two reads of /proc: judge it only once a
    // wait has lasted a whole slice, never on the way into an ordinary sleep
    let mut next_liveness = started + LIVENESS_SLICE;
    #[cfg(all(test, not(loom)))]
    let mut first_check = true;
    let result = loop {
        let w = sync.written();
        if w >= until {
            #[cfg(all(test, not(loom)))]
            if first_check {
                crate::sync::tests_knobs::FOUND_AFTER_ANNOUNCING
                    .set(crate::sync::tests_knobs::FOUND_AFTER_ANNOUNCING.get() + 1);
            }
            break Ok(w);
        }
        #[cfg(all(test, not(loom)))]
        {
            first_check = false;
        }
        // A cleanly closed writer writes nothing more: end the wait once everything it wrote
        // is there. Checked after announcing: the writer's drop stores the word, then a
        // SeqCst fence, then looks for announced waiters to wake (Dekker with the fence in
        // `announce_data_waiter`), so a closing writer never leaves this loop asleep.
        if let Some(ended) = ended_by_close(owner, sync, until) {
            break ended;
        }
        let now = Instant::now();
        let timed_out = deadline.is_some_and(|d| now >= d);
        let left = deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(now));
        // judged at the end of a wait of a millisecond or more too: callers that wait in
        // short slices (to answer Ctrl-C) never reach a whole liveness slice; polls skip it
        let judge_at_end = timed_out && now - started >= Duration::from_millis(1);
        let dead = if now >= next_liveness || judge_at_end {
            next_liveness = now + LIVENESS_SLICE;
            match liveness(stream) {
                Liveness::Dead { pid } => Some(pid),
                _ => None,
            }
        } else {
            None
        };
        if let Some(pid) = dead {
            // it may have committed just before dying
            let w = sync.written();
            break if w >= until {
                Ok(w)
            } else {
                Err(WaitError::WriterDead { pid, written: w })
            };
        }
        if timed_out {
            break Err(WaitError::Timeout { until, written: w });
        }
        // sleep in slices so a dead writer is noticed
        sync.data_wake.seq.wait(
            seq,
            announced
                .sleep(left.min(next_liveness.saturating_duration_since(now)))
                .max(Duration::from_micros(1)),
        );
        #[cfg(all(test, not(loom)))]
        let slept_on = seq;
        seq = sync.data_seq();
        #[cfg(all(test, not(loom)))]
        if seq == slept_on && sync.written() >= until {
            crate::sync::tests_knobs::SLEPT_THROUGH_A_COMMIT
                .set(crate::sync::tests_knobs::SLEPT_THROUGH_A_COMMIT.get() + 1);
        }
    };
    sync.withdraw_data_waiter();
    result
}

/// Zero-copy windows: only over shared memory, where every window is contiguous.
#[cfg(not(loom))]
impl Reader<SharedMemory> {
    /// A zero-copy window of samples `[first, end)`; see [`Window`].
    pub fn window(&self, first: u64, end: u64) -> Result<Window, ReadError> {
        self.check_owner()?;
        self.stream.window(first, end)
    }

    /// A typed zero-copy window; `T` must be the stream's dtype.
    pub fn window_as<T: Sample>(&self, first: u64, end: u64) -> Result<TypedWindow<T>, ReadError> {
        let info = self.stream.info();
        if T::DTYPE != info.dtype {
            return Err(ReadError::DTypeMismatch {
                name: info.name.clone(),
                expected: info.dtype,
                got: T::DTYPE,
            });
        }
        Ok(TypedWindow {
            window: self.window(first, end)?,
            _t: std::marker::PhantomData,
        })
    }

    /// A zero-copy window of the newest `n` samples (fewer if fewer were written, or if the
    /// writer may have overwritten older slots with a reservation it did not commit). `n`
    /// above the capacity is refused ([`ReadError::MoreThanCapacity`]).
    pub fn latest(&self, n: u64) -> Result<Window, ReadError> {
        self.check_owner()?;
        let cap = self.stream.info().capacity;
        if n > cap {
            return Err(ReadError::MoreThanCapacity {
                requested: n,
                capacity: cap,
            });
        }
        let c = self.stream.map.control();
        let w = c.samples.written();
        // samples a cancelled or partly committed reservation may have overwritten are no
        // longer offered (they are below `reserved - capacity`)
        let oldest = ring::oldest_kept(c.samples.reserved(), cap);
        self.window(w.saturating_sub(n).max(oldest).min(w), w)
    }
}

impl<B: Backing> Drop for Reader<B> {
    fn drop(&mut self) {
        if sys::fork_generation() != self.fork_generation {
            return; // a forked child's copy: the slot is the parent's
        }
        let c = self.stream.map.control();
        let s = &c.readers[self.slot];
        // a later claimer's Acquire CAS sees the slot free (and our last cursor store)
        if claims::release_slot(&s.state, self.word) && self.mode == ReaderMode::Lossless {
            // SYNC: Release pairs with the writer's Acquire count check.
            c.stats.lossless_readers.fetch_sub(1, Ordering::Release);
            // wake a writer waiting on us so it rescans without this reader
            // SYNC: Release so the woken writer sees the slot freed.
            c.samples.space_wake.seq.fetch_add(1, Ordering::Release);
            c.samples.space_wake.seq.wake_all();
        }
    }
}

/// Zero-copy windows without a reader slot: a server sends samples from the ring in place.
#[cfg(not(loom))]
impl Stream<SharedMemory> {
    /// A zero-copy window of samples `[first, end)`, as [`Reader::window`] but without a
    /// reader slot. Its bytes are one slice of the ring (across the wrap too);
    /// [`Window::headroom`] says how far the writer is from them and [`Window::check`]
    /// whether they were intact until then.
    pub fn window(&self, first: u64, end: u64) -> Result<Window, ReadError> {
        let c = self.map.control();
        let cap = self.map.capacity();
        match ring::check_window(first, end, c.samples.written(), c.samples.reserved(), cap) {
            WindowCheck::Ok => Ok(Window {
                map: self.map.clone(),
                first,
                end,
            }),
            other => Err(window_error(other, first, end, cap)),
        }
    }
}

/// Reads that need no reader slot: the stream handle itself can copy any retained window
/// and wait for samples or events (the FieldTrip server serves many clients this way
/// without registering one reader each, so they do not count as slow readers).
impl<B: Backing> Stream<B> {
    /// Copy samples `[first, end)` (and their stamps) into `out`, validated like
    /// [`Reader::read_into`].
    pub fn read_into(
        &self,
        first: u64,
        end: u64,
        out: &mut [u8],
        stamps: Option<&mut [u64]>,
    ) -> Result<(), ReadError> {
        let sb = self.info().sample_bytes;
        let needed = (end.saturating_sub(first)) as usize * sb;
        if out.len() != needed {
            return Err(ReadError::BufferSize {
                needed,
                got: out.len(),
            });
        }
        copy_out(&*self.map, first, end, as_uninit(out), stamps)
    }

    /// Append samples `[first, end)` to `out`, validated like [`Stream::read_into`], without
    /// setting the new bytes to zero first: a server building a reply copies each byte
    /// once. On an error `out` is as it was.
    pub fn read_append(&self, first: u64, end: u64, out: &mut Vec<u8>) -> Result<(), ReadError> {
        // the window first: a refused one (older than the ring, not yet written, longer
        // than the capacity) must not size an allocation
        let c = self.map.control();
        let cap = self.map.capacity();
        match ring::check_window(first, end, c.samples.written(), c.samples.reserved(), cap) {
            WindowCheck::Ok => {}
            other => return Err(window_error(other, first, end, cap)),
        }
        // at most `capacity` samples now, which the mapping holds: no overflow
        let needed = (end - first) as usize * self.info().sample_bytes;
        out.reserve(needed);
        let at = out.len();
        copy_out(
            &*self.map,
            first,
            end,
            &mut out.spare_capacity_mut()[..needed],
            None,
        )?;
        // SAFETY: `reserve` made room for `needed` more bytes, and `copy_out` returned Ok,
        // so it set every one of the `needed` bytes after `at`.
        unsafe { out.set_len(at + needed) };
        Ok(())
    }

    /// Events `[first, end)` by index, validated.
    pub fn read_events(&self, first: u64, end: u64) -> Result<Vec<Event>, ReadError> {
        read_events(self, first, end)
    }

    /// Block until `written >= samples` or `events_written >= events`, or until `timeout`
    /// passes, or `keep_waiting()` turns false (checked every 100 ms). Sleeps on the
    /// samples' futex; the writer wakes it for samples and for events alike. Returns
    /// `(written, events_written)` when it ends, whatever the reason. A dead writer does
    /// not end the wait (a new writer may take over).
    pub fn wait_for(
        &self,
        samples: u64,
        events: u64,
        timeout: Duration,
        keep_waiting: &dyn Fn() -> bool,
    ) -> (u64, u64) {
        let c = self.map.control();
        let counts = || (c.samples.written(), c.events.written());
        let done = |(s, e): (u64, u64)| s >= samples || e >= events;
        let now = counts();
        if done(now) || timeout.is_zero() {
            return now;
        }
        let deadline = Instant::now() + timeout;
        let announced = c.samples.announce_data_waiter(&c.owner.publish_barrier);
        let mut seq = announced.seq;
        let result = loop {
            // read after the announcement: see `Writer::push_event` for the handshake
            let now = counts();
            if done(now) {
                break now;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !keep_waiting() {
                break now;
            }
            c.samples
                .data_wake
                .seq
                .wait(seq, announced.sleep(left.min(Duration::from_millis(100))));
            seq = c.samples.data_seq();
        };
        c.samples.withdraw_data_waiter();
        result
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::{DType, StreamConfig};

    /// A stream in /dev/shm, removed when dropped.
    struct Named(String);

    impl Drop for Named {
        fn drop(&mut self) {
            let _ = Stream::remove(&self.0);
        }
    }

    fn stream(label: &str) -> (Named, Stream<SharedMemory>) {
        let name = format!("unit-{label}-{}", std::process::id());
        let s = Stream::create(&name, &StreamConfig::new(DType::U64, 1, 1000.0, 64)).unwrap();
        (Named(name), s)
    }

    /// The slot-free window a server sends from: one slice of the ring that holds the
    /// samples in order even where they wrap around the ring's end, its headroom shrinking
    /// as the writer comes closer, and its check failing once the writer stored into it.
    #[test]
    #[cfg_attr(miri, ignore = "miri cannot map a stream file")]
    fn a_stream_window_is_one_slice_across_the_wrap_and_fails_its_check_once_lapped() {
        let (_n, s) = stream("stream-window");
        let cap = s.info().capacity;
        let mut w = s.writer().unwrap();
        let vals: Vec<u64> = (0..cap + cap / 2).collect();
        w.write(&vals).unwrap();
        // [cap - 10, cap + 10) lies on both sides of the ring's end
        let win = s.window(cap - 10, cap + 10).unwrap();
        assert_eq!(
            (win.first(), win.end(), win.len_bytes()),
            (cap - 10, cap + 10, 160)
        );
        assert_eq!(win.headroom(), cap / 2 - 10);
        // SAFETY: this test's only writer is idle while the bytes are copied here.
        let bytes = unsafe { win.bytes() }.to_vec();
        let got: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(got, (cap - 10..cap + 10).collect::<Vec<_>>());
        assert_eq!(win.check(), Ok(()));
        // one sample short of reaching it: still intact
        w.write(&vals[..(cap / 2 - 10) as usize]).unwrap();
        assert_eq!((win.headroom(), win.check()), (0, Ok(())));
        // the writer stores into sample cap - 10's slot
        w.write(&[7u64]).unwrap();
        assert_eq!(
            win.check(),
            Err(ReadError::Overrun {
                lost: 1,
                oldest: cap - 9
            })
        );
        // windows that are not all kept are refused as the copying reads refuse them
        assert!(matches!(
            s.window(cap - 10, cap + 10),
            Err(ReadError::TooOld { oldest, .. }) if oldest == cap - 9
        ));
        let written = s.written();
        assert_eq!(
            s.window(written, written + 1).unwrap_err(),
            ReadError::NotYetWritten {
                first: written,
                end: written + 1,
                written
            }
        );
    }

    /// What `w.end = …` could make before the range was private: the copy now checks the
    /// range itself instead of trusting the window (it read past the mapping in a release
    /// build, and hit a `debug_assert` in a debug one).
    #[test]
    #[cfg_attr(miri, ignore = "miri cannot map a stream file")]
    fn a_window_wider_than_the_ring_is_refused_where_it_is_copied() {
        let (_n, s) = stream("wide-window");
        let cap = s.info().capacity;
        let mut w = s.writer().unwrap();
        let vals: Vec<u64> = (0..cap).collect();
        w.write(&vals).unwrap();
        let r = s.reader(ReaderMode::Latest).unwrap();
        let mut win = r.window(0, cap).unwrap();
        win.end = win.first + 10 * cap;
        assert_eq!(
            win.to_vec().unwrap_err(),
            ReadError::NotYetWritten {
                first: 0,
                end: 10 * cap,
                written: cap
            }
        );
    }

    /// ... and an `end` inside `[written, reserved)`: slots the writer is still filling.
    /// Before, the copy took the half-filled sample and `check()` said Ok.
    #[test]
    #[cfg_attr(miri, ignore = "miri cannot map a stream file")]
    fn a_window_reaching_into_an_open_reservation_is_refused() {
        let (_n, s) = stream("open-reservation");
        let mut w = s.writer().unwrap();
        w.write(&[1u64, 2, 3, 4]).unwrap();
        let r = s.reader(ReaderMode::Latest).unwrap();
        let mut win = r.window(2, 4).unwrap();
        let mut g = w.reserve(2).unwrap();
        g.bytes_mut().fill(0xEE);
        win.end = 5;
        assert_eq!(
            win.to_vec().unwrap_err(),
            ReadError::NotYetWritten {
                first: 2,
                end: 5,
                written: 4
            }
        );
        let typed = TypedWindow::<u64> {
            window: win,
            _t: std::marker::PhantomData,
        };
        assert!(matches!(
            typed.to_vec(),
            Err(ReadError::NotYetWritten { written: 4, .. })
        ));
        g.cancel();
    }
}
