//! Who holds the writer and the reader slots: each is one 64-bit word naming the holder's
//! process (pid and start time, see [`ProcessId`]), taken and given back with single
//! compare-and-swaps. No claim can be observed half done, so two live processes never both
//! hold the writer, and reclaiming a dead holder's word can never free a word a live
//! process has taken since (its value differs).

use crate::layout::writer_word;
use crate::ring::slot_state;
use crate::sync::{AtomicU64, Ordering};
use crate::sys::ProcessId;

/// Outcome of [`claim_writer`].
pub(crate) enum WriterClaim {
    /// We hold it; `replaced` names a dead holder we took it from.
    Won { replaced: Option<ProcessId> },
    /// A live process holds it.
    Busy(ProcessId),
}

/// Take the writer word for `me`: from never/closed, or from a holder whose process is gone.
pub(crate) fn claim_writer(word: &AtomicU64, me: ProcessId) -> WriterClaim {
    // SYNC: Acquire: if we take over from a closed or dead writer, we see its last stores
    // (its commits precede its Release of the word, or its death).
    let mut cur = word.load(Ordering::Acquire);
    loop {
        let replaced = match ProcessId::from_word(cur) {
            None => None,
            Some(holder) if holder == me => return WriterClaim::Busy(holder),
            Some(holder) if holder.alive() => return WriterClaim::Busy(holder),
            Some(dead) => Some(dead),
        };
        // SYNC: AcqRel on success: Acquire as above, Release publishes our claim (readers
        // judging liveness Acquire it). Acquire on failure: we judge the new holder next.
        match word.compare_exchange(cur, me.word(), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return WriterClaim::Won { replaced },
            Err(now) => cur = now,
        }
    }
}

/// Give the writer word back (closed cleanly). Only the holder's own word is replaced: a
/// forked child's copy of a handle, or a holder that was judged dead and replaced, leaves it.
pub(crate) fn release_writer(word: &AtomicU64, me: ProcessId) -> bool {
    // SYNC: Release: the next writer's Acquire claim sees everything we committed.
    word.compare_exchange(
        me.word(),
        writer_word::CLOSED,
        Ordering::Release,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// Take a free reader slot for `me` (state CLAIMING: the cursor is not valid yet).
pub(crate) fn claim_slot(slot: &AtomicU64, me: ProcessId) -> bool {
    // SYNC: Acquire on success pairs with the Release that freed the slot (the previous
    // holder's stores to the slot's fields happen before ours). Relaxed on failure.
    slot.compare_exchange(
        slot_state::FREE,
        slot_state::word(me.word(), slot_state::CLAIMING),
        Ordering::Acquire,
        Ordering::Relaxed,
    )
    .is_ok()
}

/// Make a claimed slot live in state `tag` (LATEST or LOSSLESS); returns its word.
pub(crate) fn activate_slot(slot: &AtomicU64, me: ProcessId, tag: u64) -> u64 {
    let w = slot_state::word(me.word(), tag);
    // SYNC: Release publishes the slot's cursor stored before; pairs with the writer's
    // Acquire in `min_lossless_cursor`.
    slot.store(w, Ordering::Release);
    w
}

/// Free our slot (word `mine`); false if it is no longer ours (reclaimed by someone who
/// judged us dead, which cannot happen while we run, or a forked copy).
pub(crate) fn release_slot(slot: &AtomicU64, mine: u64) -> bool {
    // SYNC: Release: our last cursor stores happen before the next claimer's Acquire.
    slot.compare_exchange(mine, slot_state::FREE, Ordering::Release, Ordering::Relaxed)
        .is_ok()
}

/// Free the slot if its holder's process is gone. Returns the dead holder and its state.
pub(crate) fn reclaim_slot(slot: &AtomicU64) -> Option<(ProcessId, u64)> {
    // SYNC: Acquire pairs with the Release that made the word (claim or activation).
    let w = slot.load(Ordering::Acquire);
    let holder = ProcessId::from_word(w)?;
    if holder.alive() {
        return None;
    }
    // SYNC: Release: a later claimer's Acquire sees the slot free. The CAS compares the
    // whole word, so a slot re-taken by another process since our load stays taken.
    slot.compare_exchange(w, slot_state::FREE, Ordering::Release, Ordering::Relaxed)
        .ok()
        .map(|_| (holder, slot_state::tag(w)))
}
