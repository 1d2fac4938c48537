//! Lab Streaming Layer: an int16 outlet (chunks pushed as they are, flushed at once, 360 s
//! kept for slow inlets so nothing is dropped) and one inlet per reader on localhost, through
//! liblsl as pylsl ships it (rtloop-lsl loads it). A reader blocks for the first sample,
//! then takes whatever else has arrived without waiting: liblsl's `pull_chunk` with a timeout
//! would wait for a full buffer.

use std::sync::Arc;
use std::time::Duration;

use rtloop_lsl::io::{Inlet, Outlet, OutletSpec};
use rtloop_lsl::Lsl;
use rtloop_stream::DType;

use super::{batch_samples, Receiver, Sender, TransportError};
use crate::{PeerError, Transport, Trial};

/// liblsl's error from the call `action`.
fn lsl_err<E: std::error::Error + Send + Sync + 'static>(
    action: &'static str,
) -> impl FnOnce(E) -> TransportError {
    TransportError::library(Transport::Lsl.name(), action)
}

fn load() -> Result<Arc<Lsl>, PeerError> {
    let lsl = Lsl::load().map_err(|e| PeerError::Unavailable {
        transport: Transport::Lsl.name(),
        reason: e.to_string(),
    })?;
    // errors only: liblsl's start-up notices would cut through the benchmark's table
    lsl.set_config_content("[log]\nlevel = -2\n");
    Ok(Arc::new(lsl))
}

/// The writer: an outlet named `rtloop-peers-TAG`.
pub struct LslSender {
    outlet: Outlet,
    name: String,
    /// One (unused) timestamp per sample of a chunk: liblsl stamps them itself.
    stamps: Vec<f64>,
    sample_bytes: usize,
}

impl LslSender {
    /// Announce the outlet.
    pub fn open(t: &Trial) -> Result<LslSender, PeerError> {
        let name = format!("rtloop-peers-{}", t.tag);
        let outlet = Outlet::create(
            load()?,
            &OutletSpec {
                name: name.clone(),
                kind: "EEG".into(),
                source_id: name.clone(),
                channels: t.channels,
                rate: t.rate,
                dtype: Some(DType::I16),
                labels: Vec::new(),
                units: Vec::new(),
            },
        )
        .map_err(lsl_err("create the outlet"))?;
        Ok(LslSender {
            outlet,
            name,
            stamps: vec![0.0; t.chunk],
            sample_bytes: t.sample_bytes(),
        })
    }
}

impl Sender for LslSender {
    fn endpoint(&self) -> String {
        self.name.clone()
    }

    // prepare: each inlet opened its data connection (lsl_open_stream) before it said ready

    fn send(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        let n = chunk.len() / self.sample_bytes;
        self.outlet
            .push(chunk, &self.stamps[..n])
            .map_err(lsl_err("push"))
    }
}

/// A reader: an inlet of the writer's outlet.
pub struct LslReceiver {
    inlet: Inlet,
    /// `len` bytes from `off`: aligned for int16, as liblsl requires.
    buf: Vec<u8>,
    off: usize,
    stamps: Vec<f64>,
    max: usize,
    sample_bytes: usize,
}

impl LslReceiver {
    /// Resolve the outlet by name and open an inlet (its data connection included).
    pub fn open(t: &Trial, endpoint: &str) -> Result<LslReceiver, PeerError> {
        let inlet = Inlet::open(load()?, endpoint, Some("name"), 10.0, &|| false)
            .map_err(lsl_err("open the inlet"))?;
        let max = batch_samples(t);
        let buf = vec![0u8; max * t.sample_bytes() + 8];
        let off = buf.as_ptr().align_offset(8);
        Ok(LslReceiver {
            inlet,
            buf,
            off,
            stamps: vec![0.0; max],
            max,
            sample_bytes: t.sample_bytes(),
        })
    }
}

impl Receiver for LslReceiver {
    fn recv(&mut self, timeout: Duration) -> Result<&[u8], TransportError> {
        let sb = self.sample_bytes;
        let data = &mut self.buf[self.off..self.off + self.max * sb];
        let first = self
            .inlet
            .pull(data, &mut self.stamps, 1, timeout.as_secs_f64())
            .map_err(lsl_err("pull"))?;
        if first == 0 {
            return Ok(&[]);
        }
        let rest = self
            .inlet
            .pull(&mut data[sb..], &mut self.stamps[1..], self.max - 1, 0.0)
            .map_err(lsl_err("pull"))?;
        Ok(&self.buf[self.off..self.off + (1 + rest) * sb])
    }
}
