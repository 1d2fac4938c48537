//! rtloop's signal-processing blocks, for closed loops that should not need hand-written DSP.
//!
//! Blocks work on chunks laid out as a stream holds them, `[samples, channels]`, row by row,
//! and keep their state between chunks, so a chunk of any length (one sample included) gives
//! what the whole signal would. Each states its delay in samples and refuses bad parameters
//! with what is allowed; nothing allocates while a chunk is processed.
//!
//! So far: IIR filters ([`iir`]), re-referencing ([`reref`]), threshold-crossing spike
//! detection ([`spikes`]), the envelope ([`envelope`]), decimation ([`decimate`]), ripple
//! detection ([`ripples`]) and phase estimation with a trigger at a target phase ([`phase`]).

/// A chunk that is not whole samples: what every block refuses alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a chunk of {values} values is not whole samples of {channels} channels: give samples x channels values")]
pub struct ChunkError {
    /// Values given.
    pub values: usize,
    /// Channels per sample.
    pub channels: usize,
}

impl ChunkError {
    /// Whether `values` are whole samples of `channels` channels.
    ///
    /// # Errors
    /// They are not.
    pub fn check(values: usize, channels: usize) -> Result<(), ChunkError> {
        if values % channels == 0 {
            Ok(())
        } else {
            Err(ChunkError { values, channels })
        }
    }
}

pub mod decimate;
pub mod envelope;
pub mod iir;
pub mod phase;
pub mod reref;
pub mod ripples;
pub mod spikes;

pub use decimate::{DecimateError, Decimator};
pub use envelope::{EnvelopeError, MovingRms};
pub use iir::{design, group_delay, Band, DesignError, Section, SosFilter};
pub use phase::{PhaseConfig, PhaseError, PhaseTracker, PhaseTrigger};
pub use reref::{Reference, Reref, RerefError};
pub use ripples::{Ripple, RippleConfig, RippleDetector, RippleError};
pub use spikes::{Sign, Spike, SpikeConfig, SpikeDetector, SpikeError};
