//! Where a stream's bytes live. The writer and readers are written once, against
//! [`Backing`]; the product runs them over [`SharedMemory`](crate::SharedMemory) (the mapped
//! stream file, data region mapped twice), and the loom models and miri run the *same*
//! writer and reader code over [`HeapBacking`], whose slots are atomic words those tools
//! can check. Zero-copy access (a `&[u8]` into the ring) exists only for backings that are
//! [`ZeroCopy`].

use std::mem::MaybeUninit;

use crate::layout::{ControlBlock, EVENT_SLOT_BYTES};

mod sealed {
    pub trait Sealed {}
}

/// Storage of one stream: the control block and the sample, stamp and event slots.
///
/// Loads may race with the writer's stores (another thread or process); the protocol
/// validates every copy afterwards, so a `load_*` only has to be a word-wise copy that
/// cannot fault. Only the writer stores, after announcing the overwrite.
pub trait Backing: Send + Sync + 'static + sealed::Sealed {
    /// The control block (atomics only).
    fn control(&self) -> &ControlBlock;
    /// Samples kept.
    fn capacity(&self) -> u64;
    /// Bytes per sample.
    fn sample_bytes(&self) -> usize;
    /// Events kept.
    fn event_capacity(&self) -> u64;
    /// The device and inode of the file behind this backing (`None`: it has no file), to
    /// tell whether a stream's name still leads to it.
    fn file_id(&self) -> Option<(u64, u64)> {
        None
    }
    /// Copy samples `[first, first + out.len() / sample_bytes)` (at most `capacity`) into
    /// `out`, writing every byte of it (so memory that was never set can be filled without
    /// being zeroed first). May race with the writer; callers validate after.
    fn load_samples_uninit(&self, first: u64, out: &mut [MaybeUninit<u8>]);
    /// [`Backing::load_samples_uninit`] into bytes already set.
    fn load_samples(&self, first: u64, out: &mut [u8]) {
        self.load_samples_uninit(first, as_uninit(out));
    }
    /// Store `src` (whole samples, at most `capacity`) into the slots from sample `first`.
    fn store_samples(&self, first: u64, src: &[u8]);
    /// The stamp of sample `i`.
    fn load_stamp(&self, i: u64) -> u64;
    /// Set the stamp of sample `i`.
    fn store_stamp(&self, i: u64, stamp_ns: u64);
    /// Copy event slot `i`.
    fn load_event(&self, i: u64, out: &mut [u8; EVENT_SLOT_BYTES]);
    /// Store event slot `i`.
    fn store_event(&self, i: u64, src: &[u8; EVENT_SLOT_BYTES]);
}

/// Bytes already set, seen as memory to fill. Only ever handed to code that writes set
/// bytes (never `MaybeUninit::uninit()`), so `bytes` stays initialised.
pub(crate) fn as_uninit(bytes: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; the slice is borrowed mutably for
    // the result's lifetime, and every user of the result (the `load_samples_uninit`
    // implementations and `copy_out`) writes only initialised bytes into it, so no byte of
    // `bytes` can become uninitialised through it.
    unsafe { &mut *(bytes as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// A backing whose sample slots are plain memory laid out so that every window of at most
/// `capacity` samples is one contiguous region (the doubled mapping).
pub trait ZeroCopy: Backing {
    /// Pointer to the first byte of sample `index`'s slot; the `capacity * sample_bytes`
    /// bytes from there are mapped.
    fn sample_ptr(&self, index: u64) -> *mut u8;
}

#[cfg(not(loom))]
impl sealed::Sealed for crate::SharedMemory {}

/// A stream in this process's heap, every slot an atomic word: what the loom models and
/// miri drive the shipped writer and readers over. Sample bytes must be a multiple of 8.
#[cfg(any(test, loom))]
pub struct HeapBacking {
    control: ControlBlock,
    capacity: u64,
    sample_bytes: usize,
    event_capacity: u64,
    samples: Vec<crate::sync::AtomicU64>,
    stamps: Vec<crate::sync::AtomicU64>,
    events: Vec<crate::sync::AtomicU64>,
}

#[cfg(any(test, loom))]
impl sealed::Sealed for HeapBacking {}

#[cfg(any(test, loom))]
impl HeapBacking {
    /// A zeroed stream of `capacity` samples of `sample_bytes` and `event_capacity` events.
    pub fn new(capacity: u64, sample_bytes: usize, event_capacity: u64) -> HeapBacking {
        assert!(
            sample_bytes % 8 == 0,
            "heap backing holds whole 8-byte words"
        );
        let words = |n: usize| (0..n).map(|_| crate::sync::AtomicU64::new(0)).collect();
        HeapBacking {
            control: ControlBlock::default(),
            capacity,
            sample_bytes,
            event_capacity,
            samples: words(capacity as usize * sample_bytes / 8),
            stamps: words(capacity as usize),
            events: words(event_capacity as usize * EVENT_SLOT_BYTES / 8),
        }
    }

    fn word(&self, sample: u64, k: usize) -> &crate::sync::AtomicU64 {
        let per = self.sample_bytes / 8;
        &self.samples[crate::ring::slot_of(sample, self.capacity) as usize * per + k % per]
    }
}

#[cfg(any(test, loom))]
impl Backing for HeapBacking {
    fn control(&self) -> &ControlBlock {
        &self.control
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn sample_bytes(&self) -> usize {
        self.sample_bytes
    }
    fn event_capacity(&self) -> u64 {
        self.event_capacity
    }
    fn load_samples_uninit(&self, first: u64, out: &mut [MaybeUninit<u8>]) {
        let per = self.sample_bytes / 8;
        for (k, chunk) in out.chunks_exact_mut(8).enumerate() {
            let w = self.word(first + (k / per) as u64, k);
            // SYNC: Relaxed word loads are the racy copy; the reader's Acquire fence in
            // `validate_after_copy` orders them before its check of `reserved`.
            let bytes = w.load(crate::sync::Ordering::Relaxed).to_ne_bytes();
            for (d, b) in chunk.iter_mut().zip(bytes) {
                d.write(b);
            }
        }
    }
    fn store_samples(&self, first: u64, src: &[u8]) {
        let per = self.sample_bytes / 8;
        for (k, chunk) in src.chunks_exact(8).enumerate() {
            let w = self.word(first + (k / per) as u64, k);
            let v = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            // SYNC: Relaxed: ordered after `reserved` by `begin_overwrite`'s Release fence
            // and before `written` by `publish`'s Release store.
            w.store(v, crate::sync::Ordering::Relaxed);
        }
    }
    fn load_stamp(&self, i: u64) -> u64 {
        // SYNC: Relaxed: validated with the samples, as above.
        self.stamps[crate::ring::slot_of(i, self.capacity) as usize]
            .load(crate::sync::Ordering::Relaxed)
    }
    fn store_stamp(&self, i: u64, stamp_ns: u64) {
        // SYNC: Relaxed: published with the samples, as above.
        self.stamps[crate::ring::slot_of(i, self.capacity) as usize]
            .store(stamp_ns, crate::sync::Ordering::Relaxed);
    }
    fn load_event(&self, i: u64, out: &mut [u8; EVENT_SLOT_BYTES]) {
        let base = crate::ring::slot_of(i, self.event_capacity) as usize * EVENT_SLOT_BYTES / 8;
        for (k, chunk) in out.chunks_exact_mut(8).enumerate() {
            // SYNC: Relaxed: validated after the copy, as the samples.
            let v = self.events[base + k].load(crate::sync::Ordering::Relaxed);
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
    }
    fn store_event(&self, i: u64, src: &[u8; EVENT_SLOT_BYTES]) {
        let base = crate::ring::slot_of(i, self.event_capacity) as usize * EVENT_SLOT_BYTES / 8;
        for (k, chunk) in src.chunks_exact(8).enumerate() {
            let v = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
            // SYNC: Relaxed: published by the event ring's Release, as the samples.
            self.events[base + k].store(v, crate::sync::Ordering::Relaxed);
        }
    }
}
