//! The one place the stream core takes its atomics from.
//!
//! Under `--cfg loom` these are loom's model-checked types, so the exact protocol code in
//! `ring.rs` is what the loom models explore; otherwise they are `std`'s. Nothing else in
//! the crate may name `std::sync::atomic` directly (enforced by `clippy.toml`).
//!
//! The atomics are type *aliases*, not `use` re-exports: clippy's `disallowed-types` resolves
//! a re-export to std's type itself and would flag every use, while an alias is a type of
//! its own that only this file names.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, Ordering};
#[cfg(loom)]
pub(crate) type AtomicU32 = loom::sync::atomic::AtomicU32;
#[cfg(loom)]
pub(crate) type AtomicU64 = loom::sync::atomic::AtomicU64;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, Ordering};
#[allow(clippy::disallowed_types)]
#[cfg(not(loom))]
pub(crate) type AtomicU32 = std::sync::atomic::AtomicU32;
#[allow(clippy::disallowed_types)]
#[cfg(not(loom))]
pub(crate) type AtomicU64 = std::sync::atomic::AtomicU64;

/// One step of a spin wait: a CPU pause hint, or a loom yield so models terminate.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}
