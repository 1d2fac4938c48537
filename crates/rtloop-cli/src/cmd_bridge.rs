//! `rtloop bridge`: Lab Streaming Layer in and out of rtloop streams.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rtloop_lsl::bridge::{InOptions, OutOptions};

use crate::Global;

/// Bridges to other systems.
#[derive(Debug, clap::Subcommand)]
pub enum BridgeCommand {
    /// An LSL outlet on the network becomes an rtloop stream: resolved by name, else by type;
    /// channel labels, units, rate and dtype from its description; LSL timestamps (with the
    /// inlet's time correction) become the samples' CLOCK_MONOTONIC stamps, the correction is
    /// recorded as an `lsl_time_correction` event; string (marker) streams become events. If
    /// the outlet vanishes, what was received stays and the inlet reconnects when an outlet
    /// with the same source id returns (LSL's recovery). liblsl comes from the pylsl wheel
    /// (or $RTLOOP_LIBLSL).
    LslIn(LslInArgs),
    /// An rtloop stream becomes an LSL outlet (name, type, source id, rate, channel labels
    /// and units in its description; CLOCK_MONOTONIC stamps as LSL timestamps), and its events
    /// a `Markers` outlet named NAME-markers.
    LslOut(LslOutArgs),
}

/// Options of `rtloop bridge lsl-in`.
#[derive(Debug, Clone, clap::Args)]
pub struct LslInArgs {
    /// The outlet's name, or its type (`EEG`, `Markers`, ...).
    pub query: String,
    /// Match only this property.
    #[arg(long, value_parser = ["name", "type"])]
    pub by: Option<String>,
    /// The rtloop stream to create (default: the outlet's name).
    #[arg(long)]
    pub stream: Option<String>,
    /// Seconds to wait for the outlet.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// Samples the stream keeps (default: 10 s of data, at least 65536).
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Keep the stream after the bridge stops (default: removed).
    #[arg(long)]
    pub keep: bool,
}

/// Options of `rtloop bridge lsl-out`.
#[derive(Debug, Clone, clap::Args)]
pub struct LslOutArgs {
    /// The rtloop stream.
    pub stream: String,
    /// The outlet's name (default: the stream's name).
    #[arg(long)]
    pub name: Option<String>,
    /// The outlet's content type.
    #[arg(long = "type", default_value = "EEG")]
    pub kind: String,
    /// The outlet's source id (default: rtloop:STREAM).
    #[arg(long)]
    pub source_id: Option<String>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<f64>,
}

/// Run `rtloop bridge ...`.
pub fn run(c: BridgeCommand, g: &Global) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    let lsl = Arc::new(rtloop_lsl::Lsl::load()?);
    let json = g.json;
    let report = match c {
        BridgeCommand::LslIn(a) => {
            let o = InOptions {
                query: a.query,
                by: a.by,
                stream: a.stream,
                timeout: a.timeout,
                capacity: a.capacity,
                duration: a.seconds.map(Duration::from_secs_f64),
                remove_at_end: !a.keep,
            };
            rtloop_lsl::bridge::lsl_in(&lsl, &o, &stop, &mut |meta, name| {
                // one line when ready: scripts and tests wait for it
                eprintln!(
                    "bridging LSL {meta} -> stream {name:?} (liblsl {})",
                    lsl.version()
                );
            })?
        }
        BridgeCommand::LslOut(a) => {
            let o = OutOptions {
                stream: a.stream,
                name: a.name,
                kind: Some(a.kind),
                source_id: a.source_id,
                duration: a.seconds.map(Duration::from_secs_f64),
            };
            let stream = o.stream.clone();
            rtloop_lsl::bridge::lsl_out(&lsl, &o, &stop, &mut |meta| {
                eprintln!(
                    "bridging stream {stream:?} -> LSL {meta} (liblsl {})",
                    lsl.version()
                );
            })?
        }
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} <-> {}: {} samples, {} events, time correction {:.6} s, {} outages",
            report.stream,
            report.lsl,
            report.samples,
            report.events,
            report.time_correction,
            report.outages
        );
    }
    Ok(())
}
