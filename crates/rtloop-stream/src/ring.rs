//! The ring protocol: index arithmetic and the publish / validate / wait-announcement steps,
//! written against the sync facade. The writer and readers call these steps; the loom
//! models (`loom_tests.rs`) run the writer and readers themselves over heap storage.
//!
//! Samples carry absolute indices (count since the stream began). The writer owns two
//! counters: `reserved` (it may be overwriting slots up to here) and `written` (everything
//! below is complete). A reader may use sample `s` while `s >= reserved - capacity`; it
//! checks that *after* copying (seqlock style), because the writer may lap it mid-copy.
//!
//! # Memory ordering
//!
//! | atomic | written by | Release / fence publishes | paired Acquire | loom model |
//! |---|---|---|---|---|
//! | `written` | writer, `publish` | the sample bytes and stamps of `[old, new)` | `written()` load in every read and wait | `loom_reader_never_sees_uncommitted_or_torn_samples` |
//! | `reserved` | writer, `begin_overwrite` + `fence(Release)` | "slots of samples `< end - capacity` may now be overwritten" | `fence(Acquire)` + load in `validate_after_copy` (fence-fence) | `loom_lapped_latest_reader_gets_an_overrun_never_torn_data`, `loom_cancelled_or_partly_committed_reservation_never_validates_stale_rows` |
//! | `data_wake.waiters` / `seq` | readers announce, writer bumps | SeqCst fences on both sides (Dekker), or the writer's light barrier and the sleeper's `membarrier`: writer sees the waiter or waiter sees the sample | `seq` Acquire in the futex loop | `loom_waiting_reader_is_woken_by_a_commit`, `loom_writer_claiming_while_a_reader_falls_asleep_wakes_it`, `loom_light_writer_wakes_a_sleeper_whose_membarrier_interrupts_it` |
//! | `inline_end` | writer, `store_inline` (0, `fence(Release)`, words, stamp, `end` Release) | the newest sample's copy in the publish line | `load_inline`: Acquire load, copy, `fence(Acquire)`, load again (seqlock) | `loom_newest_sample_in_the_publish_line_is_never_torn` |
//! | `cursor` (lossless) | reader, `release_to` | "I am done with samples `< cursor`" | writer `min_lossless_cursor` Acquire | `loom_lossless_writer_never_overwrites_unread_samples_and_is_woken`, `loom_lossless_writer_waits_for_the_slowest_of_two_readers` |
//! | `space_wake.waiters` / `seq` | writer announces, readers bump | SeqCst fences (Dekker) as above, or the reader's light barrier and the writer's `membarrier` | `seq` Acquire | `loom_lossless_writer_never_overwrites_unread_samples_and_is_woken` |

use crate::sync::{
    fence, heavy_barrier, light_barrier, spin_hint, AtomicU32, AtomicU64, FutexWord, Ordering,
    UNBARRIERED_SLEEP,
};
use std::time::Duration;

/// Byte offset of sample `index` in a data region of `capacity` samples.
#[inline]
#[must_use]
pub fn slot_offset(index: u64, capacity: u64, sample_bytes: usize) -> usize {
    // `slot_of(..) < capacity`, and `capacity * sample_bytes` fits the mapping, so the
    // product fits `usize`.
    slot_of(index, capacity) as usize * sample_bytes
}

/// The slot of sample `index` in a ring of `capacity`: `index % capacity`, with a mask
/// where the capacity is a power of two. A division costs 10–40 cycles, and a commit and a
/// pull each find two or three slots on the hand-off's path; the branch always goes the
/// same way for a given ring.
#[inline]
#[must_use]
pub fn slot_of(index: u64, capacity: u64) -> u64 {
    debug_assert!(capacity > 0);
    if capacity.is_power_of_two() {
        index & (capacity - 1)
    } else {
        index % capacity
    }
}

/// The oldest sample whose slot is not (being) overwritten, given the writer's `reserved`.
#[inline]
#[must_use]
pub fn oldest_kept(reserved: u64, capacity: u64) -> u64 {
    reserved.saturating_sub(capacity)
}

/// Where a requested window `[first, end)` stands against the ring's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowCheck {
    /// Fully committed and kept: read it.
    Ok,
    /// `first > end`.
    Reversed,
    /// Part of it is not written yet (`end > written`).
    NotYetWritten {
        /// Samples committed so far.
        written: u64,
    },
    /// Part of it was already overwritten; `oldest` is the oldest sample still kept.
    Overwritten {
        /// The oldest sample still kept.
        oldest: u64,
    },
}

/// Classify a window before copying. Overwrite is checked again after the copy.
#[must_use]
pub fn check_window(
    first: u64,
    end: u64,
    written: u64,
    reserved: u64,
    capacity: u64,
) -> WindowCheck {
    if first > end {
        WindowCheck::Reversed
    } else if end > written {
        WindowCheck::NotYetWritten { written }
    } else if first < oldest_kept(reserved, capacity) {
        WindowCheck::Overwritten {
            oldest: oldest_kept(reserved, capacity),
        }
    } else {
        WindowCheck::Ok
    }
}

/// The smallest capacity `>= requested` for which `capacity * sample_bytes` is a whole
/// number of pages (the data region is mapped twice back to back, so it must be
/// page-sized). `None` if it overflows.
#[must_use]
pub fn round_capacity(requested: u64, sample_bytes: u64, page: u64) -> Option<u64> {
    let g = gcd(sample_bytes, page);
    let step = page / g; // samples per page-aligned granule
    requested.checked_add(step - 1).map(|c| c / step * step)
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Bytes of the newest sample the publish line carries beside `written` (see
/// [`PublishLine`]); samples up to this size reach a reader in the line it polls.
pub const INLINE_BYTES: usize = 32;

/// Words of [`INLINE_BYTES`].
pub const INLINE_WORDS: usize = INLINE_BYTES / 8;

/// A cache line pair of its own (128 B: the x86 spatial prefetcher pulls lines in pairs).
///
/// The first 64 bytes also carry a copy of the newest sample when it is small (and its
/// stamp), a seqlock of its own: a reader that waited for `written` to change then has the
/// sample in the line it already fetched, one cache-line transfer per hand-off instead of
/// two (the line of `written`, then the sample's slot). The ring slot holds the sample too;
/// the copy only saves a transfer, and a reader that finds it changing reads the slot.
#[repr(C, align(128))]
#[derive(Default)]
pub struct PublishLine {
    /// Samples committed (monotonic). Written only by the writer.
    pub written: AtomicU64,
    /// The writer may be overwriting slots of samples below `reserved - capacity`.
    pub reserved: AtomicU64,
    /// `i + 1` while `inline_stamp` and `inline_words` hold sample `i`; 0 while the writer
    /// changes them (and in streams whose writer never filled them).
    pub inline_end: AtomicU64,
    /// The stamp of the sample held.
    pub inline_stamp: AtomicU64,
    /// The sample's bytes (native order, zero-padded to whole words).
    pub inline_words: [AtomicU64; INLINE_WORDS],
}

/// What [`RingSync::announce_data_waiter`] hands a sleeper.
#[derive(Debug, Clone, Copy)]
pub struct Announced {
    /// The futex value to sleep on.
    pub seq: u32,
    /// The longest one sleep may last (`None`: as long as the caller wants).
    pub max_sleep: Option<Duration>,
}

impl Announced {
    /// `want`, cut to the longest sleep allowed.
    #[must_use]
    pub fn sleep(&self, want: Duration) -> Duration {
        self.max_sleep.map_or(want, |m| want.min(m))
    }
}

/// A futex word and the count of sleepers announced on it.
#[repr(C, align(128))]
#[derive(Default)]
pub struct WakeLine {
    /// Bumped before every wake; sleepers pass the value they saw to `FUTEX_WAIT`.
    pub seq: FutexWord,
    /// Sleepers announced; the waking side skips the syscall while this is 0.
    pub waiters: AtomicU32,
}

/// The ring's shared synchronisation state (lives in the shared-memory control block).
#[repr(C)]
#[derive(Default)]
pub struct RingSync {
    /// `written` and `reserved`.
    pub publish: PublishLine,
    /// Readers waiting for data.
    pub data_wake: WakeLine,
    /// A lossless writer waiting for readers to make room.
    pub space_wake: WakeLine,
}

impl RingSync {
    /// Writer: announce that slots up to sample `end` (exclusive) are about to be overwritten.
    /// Must be called before writing any byte of those slots. `cur` is the `reserved` this
    /// writer stored last (or found at its claim): the writer keeps its own copy, because
    /// loading the shared word would wait for the line the polling readers keep taking.
    ///
    /// `reserved` never moves back: a reservation that was cancelled or only partly
    /// committed may already have stored into every one of its slots, so the samples of the
    /// previous lap in those slots stay reported as overwritten (a later, shorter
    /// reservation must not make them look valid again). Returns the `reserved` in force.
    #[inline]
    pub fn begin_overwrite(&self, cur: u64, end: u64) -> u64 {
        let reserved = end.max(cur);
        // SYNC: Relaxed store + Release fence: every data store the writer makes after this
        // fence is ordered after `reserved`. A reader whose copy observed any of those
        // bytes then sees `reserved >= end` after its Acquire fence (`validate_after_copy`)
        // — the fence-fence pairing that makes torn reads detectable.
        if reserved != cur {
            self.publish.reserved.store(reserved, Ordering::Relaxed);
        }
        fence(Ordering::Release);
        reserved
    }

    /// Writer, at its claim: the `reserved` in force (its own copy from then on, see
    /// [`RingSync::begin_overwrite`]).
    #[inline]
    #[must_use]
    pub fn reserved_at_claim(&self) -> u64 {
        // SYNC: Relaxed: the claim's Acquire of the writer word follows a clean writer's
        // Release of it (after all its stores); a writer that died stores nothing more. From
        // now on only this writer stores the word.
        self.publish.reserved.load(Ordering::Relaxed)
    }

    /// Writer, before the `publish` that makes sample `end - 1` visible: carry that sample
    /// (`words`, its bytes in whole words) and its stamp in the publish line.
    #[inline]
    pub fn store_inline(&self, end: u64, stamp: u64, words: &[u64]) {
        let p = &self.publish;
        // SYNC: Relaxed store + Release fence (seqlock): a reader whose copy observed any word
        // stored below sees `inline_end` of 0 or later after its Acquire fence in
        // `load_inline`, never the `end` of the sample those words replace.
        p.inline_end.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        for (slot, &w) in p.inline_words.iter().zip(words) {
            // SYNC: Relaxed: ordered by the fence above and the Release store below.
            slot.store(w, Ordering::Relaxed);
        }
        // SYNC: Relaxed: as the words.
        p.inline_stamp.store(stamp, Ordering::Relaxed);
        // SYNC: Release publishes the words and the stamp with `end`; pairs with the Acquire
        // load in `load_inline`.
        p.inline_end.store(end, Ordering::Release);
    }

    /// Reader: copy the newest sample from the publish line if it holds sample `end - 1`
    /// (`words.len()` words) and no commit changed it during the copy. Returns its stamp;
    /// `None` means read the ring slot instead.
    #[inline]
    #[must_use]
    pub fn load_inline(&self, end: u64, words: &mut [u64]) -> Option<u64> {
        let p = &self.publish;
        // SYNC: Acquire pairs with the Release store of `end` in `store_inline`: the words
        // and stamp stored before it are visible.
        if p.inline_end.load(Ordering::Acquire) != end {
            return None;
        }
        for (w, slot) in words.iter_mut().zip(&p.inline_words) {
            // SYNC: Relaxed: racy with the next commit, validated below.
            *w = slot.load(Ordering::Relaxed);
        }
        // SYNC: Relaxed: as the words.
        let stamp = p.inline_stamp.load(Ordering::Relaxed);
        // SYNC: Acquire fence after the racy loads pairs with the Release fence in
        // `store_inline`: if any word came from a later commit, the load below sees that
        // commit's 0 or its own `end`, not ours.
        fence(Ordering::Acquire);
        // SYNC: Relaxed: ordered by the fence above.
        (p.inline_end.load(Ordering::Relaxed) == end).then_some(stamp)
    }

    /// Writer: make samples below `new_written` visible. Returns whether a reader announced
    /// it is sleeping (then call [`RingSync::bump_data_seq`] and wake the futex). `light`:
    /// this writer's process is registered for `membarrier` and its stream says
    /// [`publish_barrier::LIGHT`](crate::layout::publish_barrier::LIGHT).
    #[inline]
    #[must_use]
    pub fn publish(&self, new_written: u64, light: bool) -> bool {
        // SYNC: Release publishes the sample bytes and stamps written before it; pairs with
        // the Acquire load in `written()`. Relaxed would let a reader see the count first.
        self.publish.written.store(new_written, Ordering::Release);
        // SYNC: orders the store above before the `waiters` load below (store→load, which
        // Release/Acquire do not order), Dekker with `announce_data_waiter`: either we see
        // the waiter or the waiter sees `new_written`. A SeqCst fence pairs with the
        // sleeper's SeqCst fence. The light barrier pairs with the sleeper's `membarrier`
        // (`heavy_barrier`), which runs a full barrier on this CPU: the fence's cost, waiting
        // for every store of the commit to reach the other CPUs, leaves the commit path.
        if light {
            light_barrier();
        } else {
            fence(Ordering::SeqCst);
        }
        #[cfg(all(test, not(loom)))]
        if crate::sync::tests_knobs::WRITER_IGNORES_SLEEPERS.get() {
            return false;
        }
        // SYNC: Relaxed is enough after the barrier (the barrier carries the ordering).
        self.data_wake.waiters.load(Ordering::Relaxed) != 0
    }

    /// Writer, after `publish` returned true: change the futex word so sleepers wake
    /// (or do not fall asleep on a stale value).
    #[inline]
    pub fn bump_data_seq(&self) {
        // SYNC: Release so a sleeper that reads the new `seq` (Acquire) also sees `written`.
        self.data_wake.seq.fetch_add(1, Ordering::Release);
    }

    /// Another ring's writer, right after its `publish` (whose barrier orders that ring's
    /// `written` store before this load): has a reader announced itself on *this*
    /// ring's data line? `Stream::wait_for` sleeps on the samples' line waiting for samples
    /// or events, so the event writer checks here and wakes it (Dekker across two rings:
    /// either the waiter sees the new event count or the event writer sees the waiter).
    #[inline]
    #[must_use]
    pub fn data_waiters_after_fence(&self) -> bool {
        // SYNC: Relaxed: the caller's barrier (inside `publish`) carries the ordering.
        self.data_wake.waiters.load(Ordering::Relaxed) != 0
    }

    /// Samples committed so far.
    #[inline]
    #[must_use]
    pub fn written(&self) -> u64 {
        // SYNC: Acquire pairs with the Release store in `publish`: the samples below the
        // value read are complete in memory.
        self.publish.written.load(Ordering::Acquire)
    }

    /// The writer's current `reserved` (for a pre-copy check; always re-validate after).
    #[inline]
    #[must_use]
    pub fn reserved(&self) -> u64 {
        // SYNC: Acquire so that, read after `written()`, it is at least the `reserved` the
        // writer stored before that `written` (begin_overwrite precedes publish).
        self.publish.reserved.load(Ordering::Acquire)
    }

    /// Reader, after copying samples from `first` on: were any of them possibly overwritten
    /// during the copy? `Err(oldest)` gives the oldest sample that is still intact.
    #[inline]
    pub fn validate_after_copy(&self, first: u64, capacity: u64) -> Result<(), u64> {
        // SYNC: Acquire fence after the (racy) data loads pairs with the Release fence in
        // `begin_overwrite`: if any byte we copied came from an overwrite, the load below
        // sees that overwrite's `reserved`. A plain Acquire load would not order the data
        // loads before it, hence the fence.
        fence(Ordering::Acquire);
        let oldest = oldest_kept(self.publish.reserved.load(Ordering::Relaxed), capacity);
        if first < oldest {
            Err(oldest)
        } else {
            Ok(())
        }
    }

    /// Reader: announce a sleeper before the last check of `written` and `FUTEX_WAIT`.
    /// `publish_barrier` is the stream's [`OwnerLine::publish_barrier`](crate::layout::OwnerLine).
    /// Returns the futex value to sleep on and how long a sleep may last at most.
    #[inline]
    #[must_use]
    pub fn announce_data_waiter(&self, publish_barrier: &AtomicU64) -> Announced {
        self.data_wake.waiters.fetch_add(1, Ordering::Relaxed);
        // SYNC: SeqCst fence pairs with the SeqCst fence in `publish` (Dekker): after it,
        // either our next `written()` sees the new count or the writer sees `waiters != 0`
        // and wakes. It also pairs with the fence after a writer stores `publish_barrier`
        // (at its claim, or switching, see `Writer::choose_barrier`): a writer that stores
        // after the load below read the old value sees our announcement at its next commit.
        fence(Ordering::SeqCst);
        // SYNC: Acquire pairs with the writer's Release store of the word: a word that turned
        // to FENCE comes with every earlier (light) commit visible to our re-check. The rest
        // is ordered by the fences on both sides.
        let light =
            publish_barrier.load(Ordering::Acquire) == crate::layout::publish_barrier::LIGHT;
        // a light writer skips its fence: make its CPU run one now, so that either it sees
        // our announcement or its store of `written` is visible to our next check
        let max_sleep = if !light || heavy_barrier() {
            None
        } else {
            // the kernel refused: a commit may go unannounced to us, so never sleep long
            Some(UNBARRIERED_SLEEP)
        };
        Announced {
            // SYNC: Acquire pairs with `bump_data_seq`'s Release.
            seq: self.data_wake.seq.load(Ordering::Acquire),
            max_sleep,
        }
    }

    /// Reader: the current futex value (re-read before each sleep).
    #[inline]
    #[must_use]
    pub fn data_seq(&self) -> u32 {
        // SYNC: Acquire pairs with `bump_data_seq`'s Release (a changed value means new data).
        self.data_wake.seq.load(Ordering::Acquire)
    }

    /// Reader: no longer sleeping.
    #[inline]
    pub fn withdraw_data_waiter(&self) {
        // SYNC: Relaxed: a stale non-zero only costs the writer one spurious wake syscall.
        self.data_wake.waiters.fetch_sub(1, Ordering::Relaxed);
    }

    /// Lossless writer: announce it sleeps waiting for readers. Returns the futex value to
    /// sleep on and how long a sleep may last at most.
    #[inline]
    #[must_use]
    pub fn announce_space_waiter(&self) -> Announced {
        self.space_wake.waiters.fetch_add(1, Ordering::Relaxed);
        // SYNC: SeqCst fence pairs with the SeqCst fence in `ReaderCursor::release_to`
        // (Dekker); `membarrier` with the light barrier there (readers registered for it
        // skip the fence): either a reader sees us, or its cursor store is visible to us.
        fence(Ordering::SeqCst);
        let max_sleep = (!heavy_barrier()).then_some(UNBARRIERED_SLEEP);
        Announced {
            // SYNC: Acquire pairs with the reader's Release bump of `space_wake.seq`.
            seq: self.space_wake.seq.load(Ordering::Acquire),
            max_sleep,
        }
    }

    /// Lossless writer: the current futex value of the space wake line.
    #[inline]
    #[must_use]
    pub fn space_seq(&self) -> u32 {
        // SYNC: Acquire pairs with the reader's Release bump.
        self.space_wake.seq.load(Ordering::Acquire)
    }

    /// Lossless writer: no longer sleeping.
    #[inline]
    pub fn withdraw_space_waiter(&self) {
        // SYNC: Relaxed: a stale non-zero only costs a reader one spurious wake syscall.
        self.space_wake.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Reader slot words: [`slot_state::FREE`], or the holder's process word (bit 63 set, see
/// `sys::ProcessId`) with its state in the tag bits 61–62. Holder and state in one word make
/// claiming, activating and reclaiming a slot single compare-and-swaps, and a reclaim of a
/// dead holder can never free a slot another process took in the meantime (its word differs).
pub mod slot_state {
    /// Free.
    pub const FREE: u64 = 0;
    /// Being claimed (cursor not yet valid).
    pub const CLAIMING: u64 = 1;
    /// Latest-wins reader: the writer never waits for it.
    pub const LATEST: u64 = 2;
    /// Lossless reader: the writer waits for it.
    pub const LOSSLESS: u64 = 3;

    const HELD: u64 = 1 << 63;
    const SHIFT: u32 = 61;

    /// The word of holder `id_word` (bit 63 set) in state `tag`.
    #[must_use]
    pub const fn word(id_word: u64, tag: u64) -> u64 {
        (id_word & !(3 << SHIFT)) | HELD | (tag & 3) << SHIFT
    }

    /// The state of a slot word ([`FREE`] if it names no holder).
    #[must_use]
    pub const fn tag(word: u64) -> u64 {
        if word & HELD == 0 {
            FREE
        } else {
            word >> SHIFT & 3
        }
    }
}

/// One registered reader (own cache lines: each reader writes only its own slot).
#[repr(C, align(128))]
#[derive(Default)]
pub struct ReaderCursor {
    /// Holder and state, see [`slot_state`].
    pub state: AtomicU64,
    /// Next sample the reader has not consumed.
    pub cursor: AtomicU64,
    /// Samples this reader lost to overruns.
    pub lost: AtomicU64,
    /// Overruns this reader saw.
    pub overruns: AtomicU64,
}

impl ReaderCursor {
    /// Reader: consumed everything below `cursor`. For a lossless reader this also wakes a
    /// writer that announced it waits for room; `light`: this reader's process is
    /// registered for `membarrier`, so a light barrier orders the store before the load.
    #[inline]
    pub fn release_to(&self, cursor: u64, sync: &RingSync, lossless: bool, light: bool) -> bool {
        // SYNC: Release publishes "done reading samples < cursor" (our copies happened
        // before); pairs with the Acquire load in `min_lossless_cursor`, after which the
        // writer overwrites those slots.
        self.cursor.store(cursor, Ordering::Release);
        if !lossless {
            return false;
        }
        // SYNC: orders the cursor store before the `waiters` load (Dekker with
        // `announce_space_waiter`): a SeqCst fence pairs with the writer's SeqCst fence; the
        // light barrier with the `membarrier` the writer issues before it sleeps for room.
        if light {
            light_barrier();
        } else {
            fence(Ordering::SeqCst);
        }
        if sync.space_wake.waiters.load(Ordering::Relaxed) != 0 {
            // SYNC: Release so the woken writer's Acquire of `seq` also sees our cursor.
            sync.space_wake.seq.fetch_add(1, Ordering::Release);
            return true;
        }
        false
    }
}

/// The smallest cursor over lossless readers (`None` when there is none).
#[must_use]
pub fn min_lossless_cursor(slots: &[ReaderCursor]) -> Option<u64> {
    let mut min: Option<u64> = None;
    for s in slots {
        // SYNC: Acquire pairs with the Release in the claim; the cursor read after it is
        // the one the reader registered with (or later).
        if slot_state::tag(s.state.load(Ordering::Acquire)) == slot_state::LOSSLESS {
            // SYNC: Acquire pairs with `release_to`: the reader's copies of samples below
            // the value happened before; we may overwrite them.
            let c = s.cursor.load(Ordering::Acquire);
            min = Some(min.map_or(c, |m: u64| m.min(c)));
        }
    }
    min
}

/// Spin until `cond` holds or `spins` tries pass. Returns whether it held.
#[inline]
pub fn spin_until(spins: u32, mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..spins {
        if cond() {
            return true;
        }
        spin_hint();
    }
    cond()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn capacity_is_rounded_to_whole_pages() {
        assert_eq!(
            round_capacity(24989, 8192, 4096),
            Some(24989),
            "8 KiB packets: any count"
        );
        assert_eq!(
            round_capacity(1, 768, 4096),
            Some(16),
            "384 x int16 = 768 B: 16 per 3 pages"
        );
        assert_eq!(round_capacity(16, 768, 4096), Some(16));
        assert_eq!(round_capacity(17, 768, 4096), Some(32));
        assert_eq!(round_capacity(1000, 7, 4096), Some(4096));
        assert_eq!(round_capacity(u64::MAX, 7, 4096), None);
    }

    #[test]
    fn window_checks_name_the_problem() {
        assert_eq!(check_window(5, 3, 10, 10, 8), WindowCheck::Reversed);
        assert_eq!(
            check_window(5, 11, 10, 10, 8),
            WindowCheck::NotYetWritten { written: 10 }
        );
        assert_eq!(
            check_window(1, 5, 10, 10, 8),
            WindowCheck::Overwritten { oldest: 2 }
        );
        assert_eq!(check_window(2, 10, 10, 10, 8), WindowCheck::Ok);
        // a reservation in progress shrinks what is kept
        assert_eq!(
            check_window(2, 10, 10, 12, 8),
            WindowCheck::Overwritten { oldest: 4 }
        );
        assert_eq!(check_window(0, 0, 0, 0, 8), WindowCheck::Ok);
    }

    proptest! {
        /// The mask a power-of-two capacity takes finds the same slot as the division.
        #[test]
        fn slot_of_is_the_remainder(index in any::<u64>(), shift in 0u32..40, cap in 1u64..100_000) {
            prop_assert_eq!(slot_of(index, 1u64 << shift), index % (1u64 << shift));
            prop_assert_eq!(slot_of(index, cap), index % cap);
        }

        /// Every kept window is contiguous in a doubly mapped region: it starts inside the
        /// first copy and ends inside the second.
        #[test]
        fn kept_window_is_contiguous_across_the_wrap(
            cap in 1u64..10_000, sb in 1usize..64, written in 0u64..1_000_000, len_frac in 0.0f64..=1.0
        ) {
            let len = ((cap as f64) * len_frac) as u64;
            let first = written.saturating_sub(len);
            prop_assert_eq!(check_window(first, written, written, written, cap), WindowCheck::Ok);
            let off = slot_offset(first, cap, sb);
            prop_assert!(off < cap as usize * sb);
            prop_assert!(off + (written - first) as usize * sb <= 2 * cap as usize * sb);
            // the last sample of the window sits where its own index says, modulo the region
            let last = written.max(1) - 1;
            if written > first {
                let via_window = (off + (last - first) as usize * sb) % (cap as usize * sb);
                prop_assert_eq!(via_window, slot_offset(last, cap, sb));
            }
        }

        #[test]
        fn window_is_ok_iff_inside_kept_range(cap in 1u64..1000, written in 0u64..5000, a in 0u64..6000, b in 0u64..6000) {
            let ok = a <= b && b <= written && a >= written.saturating_sub(cap);
            prop_assert_eq!(check_window(a, b, written, written, cap) == WindowCheck::Ok, ok);
        }

        #[test]
        fn rounded_capacity_is_page_multiple_and_minimal(req in 1u64..100_000, sb in 1u64..5000) {
            let c = round_capacity(req, sb, 4096).unwrap();
            prop_assert!(c >= req);
            prop_assert_eq!((c * sb) % 4096, 0);
            let step = 4096 / gcd(sb, 4096);
            prop_assert!(c - req < step);
        }
    }
}
