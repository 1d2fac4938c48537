//! The one writer of a stream: reserve → fill in place → commit, plus `write(&[T])`.

use std::time::{Duration, Instant};

use crate::backing::{Backing, ZeroCopy};
use crate::claims;
use crate::error::WriteError;
use crate::events::Event;
use crate::layout::{publish_barrier, EVENT_PAYLOAD_MAX, EVENT_SLOT_BYTES};
use crate::ring::{self, min_lossless_cursor, slot_state};
use crate::stream::DefaultBacking;
use crate::sync::{fence, Ordering};
use crate::sys::ProcessId;
use crate::{sys, DType, Sample, Stream, StreamInfo};

/// How often a writer waiting for room looks for lossless readers whose process died.
/// (Under loom, never: a model must not depend on how much real time passed.)
const RECLAIM_EVERY: Duration = if cfg!(loom) {
    Duration::from_secs(86_400)
} else {
    Duration::from_millis(10)
};

/// Default time a lossless writer waits for room before [`WriteError::Timeout`].
pub const DEFAULT_LOSSLESS_TIMEOUT: Duration = Duration::from_secs(5);

/// The stream's one writer. Dropping it marks the stream's writer as closed.
pub struct Writer<B: Backing = DefaultBacking> {
    stream: Stream<B>,
    written: u64,
    events_written: u64,
    /// The samples' `reserved` as this writer last stored it (only it stores the word).
    reserved: u64,
    /// The events' `reserved`, likewise.
    events_reserved: u64,
    /// Where commit stamps and heartbeats come from: CLOCK_MONOTONIC read through the CPU's
    /// counter, without the `lfence` of `clock_gettime` (see [`sys::StampClock`]).
    clock: sys::StampClock,
    /// A lower bound of the slowest lossless reader's cursor (cursors only move forward).
    room_cache: u64,
    commits: u64,
    lossless_timeout: Duration,
    spin: Duration,
    /// The process that claimed the writer word (compared by the release at drop).
    me: ProcessId,
    /// This process is registered for `membarrier`: it may publish with the light barrier.
    light_capable: bool,
    /// CLOCK_MONOTONIC ns at which to look again whether the registration (started on a
    /// thread of its own at the claim) has finished.
    capability_check_ns: u64,
    /// Publishing with the light barrier now (the owner line's `publish_barrier` says so).
    light: bool,
    /// CLOCK_MONOTONIC ns until which to keep fencing: the last time a commit found a
    /// sleeping reader, plus [`FENCE_HOLD`].
    pub(crate) fence_until_ns: u64,
    /// [`FENCE_HOLD`] in ns (tests shorten it to switch at every commit).
    pub(crate) fence_hold_ns: u64,
    /// [`sys::fork_generation`] at the claim: a forked child's copy of the handle neither
    /// writes through it nor gives the parent's writer up.
    fork_generation: u64,
}

impl<B: Backing> std::fmt::Debug for Writer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("stream", &self.stream.name())
            .field("written", &self.written)
            .finish()
    }
}

/// Samples reserved by [`Writer::reserve`]: fill them in place, then commit.
pub struct WriteGuard<'a, B: Backing = DefaultBacking> {
    writer: &'a mut Writer<B>,
    n: u64,
}

impl<B: Backing> Writer<B> {
    pub(crate) fn new(stream: Stream<B>, me: ProcessId, light: bool) -> Self {
        let c = stream.map.control();
        let written = c.samples.written();
        let events_written = c.events.written();
        // SYNC: Relaxed: only this writer stores `commits` from now on.
        let commits = c.owner.commits.load(Ordering::Relaxed);
        let (reserved, events_reserved) =
            (c.samples.reserved_at_claim(), c.events.reserved_at_claim());
        Writer {
            stream,
            written,
            events_written,
            reserved,
            events_reserved,
            clock: sys::StampClock::new(),
            room_cache: 0,
            commits,
            lossless_timeout: DEFAULT_LOSSLESS_TIMEOUT,
            spin: Duration::from_micros(20),
            me,
            light_capable: light,
            capability_check_ns: 0,
            light,
            fence_until_ns: 0,
            // the models must not depend on how long a step took: there the hold never ends
            fence_hold_ns: if cfg!(loom) {
                u64::MAX
            } else {
                FENCE_HOLD.as_nanos() as u64
            },
            fork_generation: sys::fork_generation(),
        }
    }

    /// Refuse a forked child's copy of this writer: the stream's writer is the parent.
    #[inline]
    fn check_owner(&self) -> Result<(), WriteError> {
        if sys::fork_generation() == self.fork_generation {
            Ok(())
        } else {
            Err(WriteError::ForkedCopy {
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

    /// Samples committed so far.
    #[must_use]
    pub fn written(&self) -> u64 {
        self.written
    }

    /// How long to wait for lossless readers before giving up (default 5 s).
    pub fn set_lossless_timeout(&mut self, timeout: Duration) {
        self.lossless_timeout = timeout;
    }

    /// How long to spin before sleeping while waiting for lossless readers (default 20 µs).
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Reserve `n` samples after the last commit: a contiguous, writable region even across
    /// the wrap. In lossless mode this waits until registered readers made room.
    #[inline]
    pub fn reserve(&mut self, n: usize) -> Result<WriteGuard<'_, B>, WriteError> {
        let n = self.reservable(n)?;
        let end = self.written + n;
        self.wait_for_room(end)?;
        // `reserved` never moves back (see `begin_overwrite`): slots a cancelled or partly
        // committed reservation (or a writer that died mid-reservation) may have stored
        // into stay reported as overwritten
        self.reserved = self
            .stream
            .map
            .control()
            .samples
            .begin_overwrite(self.reserved, end);
        Ok(WriteGuard { writer: self, n })
    }

    /// Wait (up to the lossless timeout) until `n` samples can be reserved without waiting,
    /// reserving nothing: lossless readers may hold the writer back. Callers that wait in
    /// slices (to stay interruptible) use it before [`Writer::reserve`].
    pub fn wait_room(&mut self, n: usize) -> Result<(), WriteError> {
        let n = self.reservable(n)?;
        self.wait_for_room(self.written + n)
    }

    /// `n` if this writer may reserve that many samples at all (it owns the stream, and `n`
    /// fits the capacity).
    #[inline]
    fn reservable(&self, n: usize) -> Result<u64, WriteError> {
        self.check_owner()?;
        let cap = self.stream.info().capacity;
        let n = n as u64;
        if n > cap {
            return Err(WriteError::TooLarge {
                requested: n,
                capacity: cap,
            });
        }
        Ok(n)
    }

    /// Write whole samples (`data.len()` a multiple of the channel count, sample-major),
    /// stamped with the current time. Larger writes than the capacity go in pieces.
    /// Returns the new `written`.
    pub fn write<T: Sample>(&mut self, data: &[T]) -> Result<u64, WriteError> {
        self.check_dtype(T::DTYPE)?;
        // SAFETY: every `Sample` type is plain old data with no padding or invalid bit
        // patterns; viewing it as bytes is sound.
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data))
        };
        self.write_bytes(bytes, None)
    }

    /// Write raw sample bytes (native byte order, the stream's dtype), optionally with the
    /// CLOCK_MONOTONIC time (ns) to stamp them with. Returns the new `written`.
    pub fn write_bytes(&mut self, bytes: &[u8], stamp_ns: Option<u64>) -> Result<u64, WriteError> {
        self.whole_samples(bytes.len())?;
        let info = self.stream.info();
        let sb = info.sample_bytes;
        let max_piece = info.capacity as usize * sb;
        let (start, requested) = (self.written, (bytes.len() / sb) as u64);
        for piece in bytes.chunks(max_piece) {
            let committed = self.written - start;
            let mut g = match self.reserve(piece.len() / sb) {
                Ok(g) => g,
                // nothing of this write is in the stream yet: the plain error says it all
                Err(e) if committed == 0 => return Err(e),
                Err(e) => {
                    return Err(WriteError::Incomplete {
                        committed,
                        requested,
                        source: Box::new(e),
                    })
                }
            };
            g.store(0, piece);
            g.commit_stamped(stamp_ns);
        }
        Ok(self.written)
    }

    /// The samples `bytes` bytes of this stream's dtype hold; data that is not whole
    /// samples (a channel count that is not the stream's) is refused.
    #[inline]
    pub fn whole_samples(&self, bytes: usize) -> Result<usize, WriteError> {
        let info = self.stream.info();
        if bytes % info.sample_bytes == 0 {
            Ok(bytes / info.sample_bytes)
        } else {
            Err(WriteError::ChannelMismatch {
                name: info.name.clone(),
                n_channels: info.n_channels,
                values: bytes / info.dtype.itemsize(),
            })
        }
    }

    /// Refuse data of another dtype.
    #[inline]
    pub fn check_dtype(&self, got: DType) -> Result<(), WriteError> {
        let info = self.stream.info();
        if got == info.dtype {
            Ok(())
        } else {
            Err(WriteError::DTypeMismatch {
                name: info.name.clone(),
                expected: info.dtype,
                got,
            })
        }
    }

    /// Tell readers this writer is alive although it has nothing to commit.
    pub fn heartbeat(&self) {
        // SYNC: Relaxed: a liveness hint, read without ordering by monitors.
        self.stream
            .map
            .control()
            .owner
            .heartbeat_ns
            .store(sys::monotonic_ns(), Ordering::Relaxed);
    }

    /// Events pushed so far.
    #[must_use]
    pub fn events_written(&self) -> u64 {
        self.events_written
    }

    /// Append an event to the stream's event ring, stamped now. Returns its index.
    pub fn push_event(&mut self, ev: &Event) -> Result<u64, WriteError> {
        self.push_event_stamped(ev, None)
    }

    /// Append an event stamped with `stamp_ns` (CLOCK_MONOTONIC ns; `None`: now), for an
    /// event that happened before it arrived (a bridged marker keeps its source's time).
    /// Returns its index.
    pub fn push_event_stamped(
        &mut self,
        ev: &Event,
        stamp_ns: Option<u64>,
    ) -> Result<u64, WriteError> {
        self.check_owner()?;
        if ev.payload_bytes() > EVENT_PAYLOAD_MAX {
            return Err(WriteError::EventTooLarge {
                bytes: ev.payload_bytes(),
                max: EVENT_PAYLOAD_MAX,
            });
        }
        let mut slot = [0u8; EVENT_SLOT_BYTES];
        ev.encode(stamp_ns.unwrap_or_else(sys::monotonic_ns), &mut slot);
        let map = &self.stream.map;
        let sync = &map.control().events;
        let index = self.events_written;
        self.events_reserved = sync.begin_overwrite(self.events_reserved, index + 1);
        // only this writer stores there, after `begin_overwrite` (readers validate copies)
        map.store_event(index, &slot);
        self.events_written = index + 1;
        if sync.publish(index + 1, self.light) {
            sync.bump_data_seq();
            sync.data_wake.seq.wake_all();
        }
        // `Stream::wait_for` sleeps on the samples' futex for samples *or* events; the
        // barrier inside `publish` above pairs with its announcement (loom model
        // `loom_event_wakes_a_reader_waiting_for_events`).
        let samples = &map.control().samples;
        if samples.data_waiters_after_fence() {
            samples.bump_data_seq();
            samples.data_wake.seq.wake_all();
        }
        Ok(index)
    }

    #[inline]
    fn wait_for_room(&mut self, end: u64) -> Result<(), WriteError> {
        let cap = self.stream.info().capacity;
        let Some(need) = end.checked_sub(cap) else {
            return Ok(());
        };
        if self.room_cache >= need {
            return Ok(());
        }
        let c = self.stream.map.control();
        // SYNC: Acquire pairs with the reader's Release increment at registration.
        if c.stats.lossless_readers.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        self.wait_for_readers(need, end)
    }

    /// Lossless readers hold samples the reservation up to `end` would overwrite (`need`:
    /// the cursor they must reach): look again, spin, then sleep until they move on.
    #[cold]
    #[inline(never)]
    fn wait_for_readers(&mut self, need: u64, end: u64) -> Result<(), WriteError> {
        let c = self.stream.map.control();
        let room = || min_lossless_cursor(&c.readers).is_none_or(|m| m >= need);
        let started = Instant::now();
        let spins = (self.spin.as_nanos() / 20).min(u128::from(u32::MAX)) as u32;
        if ring::spin_until(spins, room) {
            self.refresh_room_cache();
            return Ok(());
        }
        let mut last_reclaim = Instant::now();
        loop {
            let announced = c.samples.announce_space_waiter();
            let ok = room();
            if !ok {
                let left = self.lossless_timeout.saturating_sub(started.elapsed());
                if left.is_zero() {
                    c.samples.withdraw_space_waiter();
                    return Err(self.timeout_error(need, end, started));
                }
                c.samples.space_wake.seq.wait(
                    announced.seq,
                    announced.sleep(left.min(Duration::from_millis(10))),
                );
            }
            c.samples.withdraw_space_waiter();
            if ok || room() {
                self.refresh_room_cache();
                return Ok(());
            }
            if last_reclaim.elapsed() >= RECLAIM_EVERY {
                self.stream.reclaim_dead_readers();
                last_reclaim = Instant::now();
            }
        }
    }

    fn refresh_room_cache(&mut self) {
        self.room_cache = min_lossless_cursor(&self.stream.map.control().readers).unwrap_or(0);
    }

    fn timeout_error(&self, need: u64, end: u64, started: Instant) -> WriteError {
        let slowest = self
            .stream
            .map
            .control()
            .readers
            .iter()
            // SYNC: Relaxed: diagnostic snapshot for the error message.
            .filter_map(|s| {
                let w = s.state.load(Ordering::Relaxed);
                (slot_state::tag(w) == slot_state::LOSSLESS).then(|| {
                    let pid = ProcessId::from_word(w).map_or(0, ProcessId::pid);
                    (s.cursor.load(Ordering::Relaxed), pid)
                })
            })
            .min()
            .unwrap_or((need, 0));
        WriteError::Timeout {
            reader_pid: slowest.1,
            reader_cursor: slowest.0,
            needed_end: end,
            waited_ms: started.elapsed().as_millis() as u64,
        }
    }

    #[inline]
    fn commit(&mut self, k: u64, stamp_ns: Option<u64>) {
        let map = &self.stream.map;
        let c = map.control();
        // a caller's stamp costs no clock read between the data and its publication
        let stamp = stamp_ns.unwrap_or_else(|| self.clock.now_ns());
        for i in self.written..self.written + k {
            // only this writer stores there, after `begin_overwrite` covered sample `i`
            map.store_stamp(i, stamp);
        }
        let sb = map.sample_bytes();
        if k > 0 && sb <= ring::INLINE_BYTES {
            // the newest sample rides in the line readers poll (see `PublishLine`)
            let mut words = [0u64; ring::INLINE_WORDS];
            let bytes = words_as_bytes(&mut words);
            map.load_samples(self.written + k - 1, &mut bytes[..sb]);
            c.samples
                .store_inline(self.written + k, stamp, &words[..sb.div_ceil(8)]);
        }
        self.written += k;
        self.commits += 1;
        let woke = c.samples.publish(self.written, self.light);
        if woke {
            c.samples.bump_data_seq();
            c.samples.data_wake.seq.wake_all();
        }
        // liveness and statistics after the publication, off a reader's path: a caller's
        // stamp may be of another moment than now, so the heartbeat reads the clock then
        let now = if stamp_ns.is_some() {
            self.clock.now_ns()
        } else {
            stamp
        };
        // SYNC: Relaxed: liveness and statistics, read without ordering.
        c.owner.heartbeat_ns.store(now, Ordering::Relaxed);
        c.owner.commits.store(self.commits, Ordering::Relaxed);
        if !self.light_capable && now >= self.capability_check_ns {
            // fences until this process's registration for `membarrier` has finished
            self.capability_check_ns = now.saturating_add(FENCE_HOLD.as_nanos() as u64);
            self.light_capable = sys::membarrier_registered();
        }
        if self.light_capable {
            self.choose_barrier(woke, now);
        }
    }
}

/// How long a writer keeps fencing after a commit found a sleeping reader. Readers that
/// sleep more often than this never pay the `membarrier` a light writer needs of them (it
/// costs a sleeper about 10 µs, more than a fence costs the writer); readers that sleep
/// less often pay it at most once per hold, so never more than 1 % of a core; readers that
/// spin never make the writer fence (after this long past a sleep).
pub const FENCE_HOLD: Duration = Duration::from_millis(1);

impl<B: Backing> Writer<B> {
    /// After a commit: fence from now on while readers sleep for samples, light again once
    /// none was found sleeping for [`FENCE_HOLD`]. Either switch is safe at any moment (see
    /// [`store_publish_barrier`]).
    #[inline]
    fn choose_barrier(&mut self, found_a_sleeper: bool, now: u64) {
        #[cfg(all(test, not(loom)))]
        if crate::sync::tests_knobs::WRITER_STAYS_LIGHT.get() {
            return;
        }
        let light = if found_a_sleeper {
            self.fence_until_ns = now.saturating_add(self.fence_hold_ns);
            false
        } else {
            now >= self.fence_until_ns
        };
        if light != self.light {
            self.light = light;
            store_publish_barrier(&self.stream.map.control().owner, light);
        }
    }
}

/// Say which barrier the writer publishes with from its next commit on (at its claim, and
/// when it switches). SYNC: Release store, paired with a sleeper's Acquire load of the word
/// (a sleeper that reads FENCE then sees every earlier, light commit); then a SeqCst fence
/// before the next commit's `waiters` load: a sleeper that announced itself and then read
/// the old word (skipping `membarrier` for an old FENCE) is seen by that commit, since its
/// announcement precedes its load, which precedes our store, in the fences' single order.
pub(crate) fn store_publish_barrier(owner: &crate::layout::OwnerLine, light: bool) {
    let word = if light {
        publish_barrier::LIGHT
    } else {
        publish_barrier::FENCE
    };
    owner.publish_barrier.store(word, Ordering::Release);
    fence(Ordering::SeqCst);
}

/// The bytes of a few words (native order), to fill them from a slot.
pub(crate) fn words_as_bytes(
    words: &mut [u64; ring::INLINE_WORDS],
) -> &mut [u8; ring::INLINE_BYTES] {
    // SAFETY: `[u64; INLINE_WORDS]` and `[u8; INLINE_BYTES]` have the same size, every bit
    // pattern is valid for both, and u8's alignment is 1; the borrow is carried over.
    unsafe { &mut *words.as_mut_ptr().cast::<[u8; ring::INLINE_BYTES]>() }
}

impl<B: Backing> Writer<B> {
    /// Whether the stream's writer word is still ours (not taken over after we were judged
    /// dead, not a forked child's copy).
    fn holds_claim(&self) -> bool {
        // SYNC: Relaxed: compared with our own word only; the close's Release follows.
        self.stream
            .map
            .control()
            .owner
            .writer
            .load(Ordering::Relaxed)
            == self.me.word()
    }
}

impl<B: Backing> Drop for Writer<B> {
    fn drop(&mut self) {
        if sys::fork_generation() != self.fork_generation {
            return; // a forked child's copy: the writer is the parent's
        }
        let c = self.stream.map.control();
        // A clean close ends the stream: its name goes (unless it was made to be kept), so it
        // is never resolved again and its memory comes back once the last reader unmaps it.
        // Done while we still hold the claim, so no replacement can have taken the name.
        if !self.stream.info().keep && self.holds_claim() {
            self.stream.unlink_if_current();
        }
        // the next writer's Acquire claim sees everything we committed (Release inside)
        if !claims::release_writer(&c.owner.writer, self.me) {
            return;
        }
        // Readers waiting for samples end their wait with `WriterClosed`: they announced
        // themselves before checking the writer word, and this SeqCst fence orders the
        // release above before the `waiters` load (Dekker, as in `RingSync::publish`).
        fence(Ordering::SeqCst);
        if c.samples.data_waiters_after_fence() {
            c.samples.bump_data_seq();
            c.samples.data_wake.seq.wake_all();
        }
    }
}

impl<B: Backing> WriteGuard<'_, B> {
    /// Samples reserved.
    #[must_use]
    pub fn len(&self) -> usize {
        self.n as usize
    }

    /// Whether nothing was reserved.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Copy `src` (whole samples, sample-major) into the reservation from sample `offset`
    /// on (works on every backing; [`WriteGuard::bytes_mut`] fills in place).
    ///
    /// # Panics
    ///
    /// If `src` is not whole samples or reaches past the reservation (a caller bug).
    pub fn store(&mut self, offset: usize, src: &[u8]) {
        let map = &self.writer.stream.map;
        let sb = map.sample_bytes();
        assert!(
            src.len() % sb == 0 && offset as u64 + (src.len() / sb) as u64 <= self.n,
            "store of {} bytes at sample {offset} does not fit a reservation of {} samples of {sb} bytes",
            src.len(),
            self.n
        );
        map.store_samples(self.writer.written + offset as u64, src);
    }

    /// Publish all reserved samples, stamped now.
    #[inline]
    pub fn commit(self) {
        self.commit_stamped(None);
    }

    /// Publish all reserved samples with an explicit CLOCK_MONOTONIC stamp (ns).
    #[inline]
    pub fn commit_stamped(self, stamp_ns: Option<u64>) {
        let n = self.n;
        self.writer.commit(n, stamp_ns);
    }

    /// Give the reservation up: nothing is published (dropping the guard does the same).
    /// Readers never see what was stored into it: the slots stay reported as overwritten.
    pub fn cancel(self) {}

    /// Publish only the first `k` reserved samples.
    pub fn commit_n(self, k: usize) -> Result<(), WriteError> {
        if k as u64 > self.n {
            return Err(WriteError::CommitTooLarge {
                requested: k as u64,
                reserved: self.n,
            });
        }
        self.writer.commit(k as u64, None);
        Ok(())
    }
}

impl<B: ZeroCopy> WriteGuard<'_, B> {
    /// The reserved samples' bytes (sample-major), contiguous even across the wrap.
    #[inline]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let map = &self.writer.stream.map;
        let len = self.n as usize * map.sample_bytes();
        // SAFETY: the reservation starts in the first data view and is at most `capacity`
        // samples, so it lies inside the doubled mapping; this writer is the only one
        // allowed to store there (claim) and `begin_overwrite` announced it to readers.
        // Readers of the same slots only copy and validate, never hold references (their
        // zero-copy views are `unsafe` with that contract).
        unsafe { std::slice::from_raw_parts_mut(map.sample_ptr(self.writer.written), len) }
    }

    /// The reserved samples as values of the stream's dtype, `n * n_channels` long.
    #[inline]
    pub fn as_mut_slice<T: Sample>(&mut self) -> Result<&mut [T], WriteError> {
        self.writer.check_dtype(T::DTYPE)?;
        let bytes = self.bytes_mut();
        let len = bytes.len() / std::mem::size_of::<T>();
        // SAFETY: the region is at least 8-byte aligned for every sample (page-aligned
        // base, sample_bytes a multiple of itemsize) and holds `len` values of T, which is
        // plain old data.
        Ok(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), len) })
    }
}
