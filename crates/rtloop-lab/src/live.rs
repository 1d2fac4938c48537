//! What a load test measures, published live as streams while it runs: every HubClockDelta
//! (µs, as the latency histogram counts it) and every PercentUsed reading of the device's
//! memory monitor. `rtloop view` (or any reader) shows them as they happen; they are removed
//! when the run ends.

use std::time::Duration;

use rtloop_stream::{ClaimError, CreateError, DType, Stream, StreamConfig, Writer};

/// Why the live streams could not be made.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// A stream could not be created (a live run already publishes under that prefix, or
    /// /dev/shm is full).
    #[error("cannot publish the run's live figures: {0} (choose another --publish prefix, or --no-publish)")]
    Create(#[from] CreateError),
    /// Its writer could not be claimed.
    #[error("cannot publish the run's live figures: {0}")]
    Claim(#[from] ClaimError),
}

/// The two streams of one run, `<prefix>.latency` and `<prefix>.percent_used`.
pub struct LiveStreams {
    latency: Writer,
    percent_used: Writer,
    names: [String; 2],
}

impl LiveStreams {
    /// Create both streams (replacing ones a killed run left under the same names).
    pub fn create(prefix: &str, monitor_hz: u64) -> Result<Self, LiveError> {
        let make = |suffix: &str, ch: &str, unit: &str, rate: f64, what: &str| {
            let name = format!("{prefix}.{suffix}");
            let mut cfg = StreamConfig::new(DType::F64, 1, rate, 1 << 20);
            cfg.ch_names = vec![ch.to_owned()];
            cfg.ch_units = vec![unit.to_owned()];
            cfg.content_type = "latency-lab".to_owned();
            cfg.description = what.to_owned();
            let s = Stream::create_replacing(&name, &cfg)?;
            let mut w = s.writer()?;
            // a lossless reader that falls behind costs it rows, never the host a wait
            w.set_lossless_timeout(Duration::ZERO);
            Ok::<_, LiveError>((w, name))
        };
        let (latency, a) = make(
            "latency",
            "hub_clock_delta",
            "us",
            0.0,
            "latency lab: each loopback's HubClockDelta (us), measured part of the run",
        )?;
        let (percent_used, b) = match make(
            "percent_used",
            "percent_used",
            "%",
            monitor_hz as f64,
            "latency lab: the device FIFO's PercentUsed at each memory-monitor reading",
        ) {
            Ok(x) => x,
            Err(e) => {
                let _ = Stream::remove(&a);
                return Err(e);
            }
        };
        Ok(LiveStreams {
            latency,
            percent_used,
            names: [a, b],
        })
    }

    /// The streams' names.
    #[must_use]
    pub fn names(&self) -> &[String; 2] {
        &self.names
    }

    /// Publish loopback latencies (µs), one commit for all of them.
    pub fn latencies(&mut self, us: &[f64]) {
        if !us.is_empty() {
            let _ = self.latency.write(us);
        }
    }

    /// Publish PercentUsed readings, one commit for all of them.
    pub fn percent_used(&mut self, pct: &[f64]) {
        if !pct.is_empty() {
            let _ = self.percent_used.write(pct);
        }
    }
}

impl Drop for LiveStreams {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = Stream::remove(n);
        }
    }
}
