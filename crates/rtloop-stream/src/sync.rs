//! The one place the stream core takes its atomics from.
//!
//! Under `--cfg loom` these are loom's model-checked types, so the exact protocol code in
//! `ring.rs` is what the loom models explore; otherwise they are `std`'s. Nothing else in
//! the crate may name `std::sync::atomic` directly (enforced by `clippy.toml`).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

#[allow(clippy::disallowed_types)]
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// One step of a spin wait: a CPU pause hint, or a loom yield so models terminate.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
