//! # rtloop-runtime
//!
//! A LiCoRICE-style tick runtime. A model file names signals (each an rtloop stream with its
//! history), sources, modules and sinks; `rtloop run model.yaml` starts each as its own
//! process and drives them once per tick: the timer starts the tick on an absolute
//! CLOCK_MONOTONIC deadline, sources run, modules follow as soon as their inputs are done
//! (each waits on its producers' futex words, not on a global barrier), sinks last. Every
//! tick records start lateness, per-process execution time and deadline misses.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod blocks;
pub mod board;
pub mod drivers;
pub mod model;
pub mod process;
pub mod run;
pub mod rust_module;
pub mod timer;
