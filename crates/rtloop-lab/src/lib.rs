//! The latency lab: ONIX's closed-loop tuning workflow in software, on any transport.
//!
//! * [`frame`]: the device's frames (ONI header + load tester / memory monitor / heartbeat
//!   payloads), the load tester's limits, ReadSize validation, and the host's frame assembler
//!   (frames straddle read blocks, they are delivered whole).
//! * [`device`]: the emulated device — its own 250 MHz clock derived from CLOCK_MONOTONIC,
//!   frames produced on schedule into a bounded FIFO (the "hardware buffer") or straight into
//!   a read the host has posted, loopbacks answered with HubClockDelta = now − value.
//! * [`host`]: reads exactly ReadSize bytes per block, loops back every Nth hub clock, collects
//!   the deltas into a 0–1000 µs histogram, PercentUsed over time and the host queue depth.
//! * [`link`]: the device↔host link, two one-directional channels of rtloop-transport: an
//!   rtloop stream, a UNIX socket, TCP, or the FieldTrip buffer server.
//! * [`tune`]: the ReadSize sweep with step classification and a recommendation, and the rate
//!   sweep of liboni's `onix-loadtest`.
//! * [`work`]: processing per block (band-pass + threshold) so tuning includes real load.
//! * [`loadtest`]: one load test as a call with a typed report (the command line and the
//!   Python package are shells over it), and the device's child role.
//! * [`reference`]: the bare cache-line ping-pong a loop's latency is judged against.
//! * [`demo`]: `rtloop demo`, a writer here and a checking reader in another process.

pub mod demo;
pub mod device;
pub mod frame;
pub mod host;
pub mod link;
pub mod live;
pub mod loadtest;
pub mod pacing;
pub mod reference;
pub mod tune;
pub mod work;

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// End every load test running in this process at its next block (Ctrl-C): the host stops
/// the device, the run's streams are removed, and the report holds what was measured so far.
pub fn interrupt() {
    // Ordering: a flag with nothing published through it: Relaxed.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether [`interrupt`] was called.
#[must_use]
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}
