//! `rtloop bridge`: Lab Streaming Layer in and out of rtloop streams, BrainFlow boards in.
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
    /// Any BrainFlow board becomes rtloop streams, one per kind of data: PREFIX.eeg,
    /// PREFIX.accel, PREFIX.gyro, ... (channel names, types, rate; µV for EEG/EMG/ECG/EOG) and
    /// PREFIX.board with BrainFlow's package number, timestamp and marker rows; boards with
    /// several presets (Muse, EmotiBit) add their auxiliary and ancillary kinds. Each sample is
    /// stamped with BrainFlow's timestamp in rtloop's clock; a non-zero marker becomes a
    /// `marker` event at its sample; gaps in the package numbers are counted as lost samples.
    /// A board silent for --stall seconds (or whose session fails) is reported, released and
    /// prepared again every --retry seconds until it delivers; what was written stays. The
    /// playback board ends at the end of its file. libBoardController comes from the brainflow
    /// wheel (or $RTLOOP_LIBBOARDCONTROLLER). Options by board: serial port for Cyton,
    /// Cyton+Daisy, Ganglion and Muse/BrainBit BLED dongles; --ip-port (and --ip-address) for
    /// the OpenBCI WiFi shield; --mac-address for Enophone and Mentalab Explore; --file and
    /// --master-board for playback_file; --ip-address, --ip-port and --master-board for
    /// streaming (docs/brainflow.md).
    BrainflowIn(Box<BrainflowInArgs>),
}

/// Options of `rtloop bridge brainflow-in`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrainflowInArgs {
    /// The board: its name as BrainFlow spells it, any case, with or without _BOARD
    /// (SYNTHETIC_BOARD, synthetic, cyton, cyton_daisy, playback_file), or its id (-1, 0).
    #[arg(
        long,
        required_unless_present = "list_boards",
        allow_hyphen_values = true
    )]
    pub board: Option<String>,
    /// Serial port (Cyton and Cyton+Daisy dongle, Ganglion and BLED112 dongles): /dev/ttyUSB0.
    #[arg(long)]
    pub serial_port: Option<String>,
    /// IP address: the WiFi shield (found by itself when left out), a multicast group
    /// (streaming board), EmotiBit's broadcast address.
    #[arg(long)]
    pub ip_address: Option<String>,
    /// IP port: a free local port for the WiFi shield, the streaming board's port.
    #[arg(long)]
    pub ip_port: Option<u16>,
    /// IP protocol, where a board lets you choose.
    #[arg(long, value_parser = ["tcp", "udp"])]
    pub ip_protocol: Option<String>,
    /// Bluetooth address (Enophone, Mentalab Explore; optional for Muse, Ganglion native).
    #[arg(long)]
    pub mac_address: Option<String>,
    /// Board-specific text BrainFlow passes on (Muse startup preset `p50`, Ganglion `fw:2`).
    #[arg(long)]
    pub other_info: Option<String>,
    /// Serial number or device name, to pick one of several devices.
    #[arg(long)]
    pub serial_number: Option<String>,
    /// Seconds for discovery and socket operations (0: the board's default).
    #[arg(long, default_value_t = 0)]
    pub timeout: u32,
    /// The file the playback board plays (BrainFlow's CSV: DataFilter.write_file, a
    /// file streamer).
    #[arg(long)]
    pub file: Option<String>,
    /// The board that recorded the file (playback) or streams (streaming board).
    #[arg(long, allow_hyphen_values = true)]
    pub master_board: Option<String>,
    /// A string sent to the board with BrainFlow's config_board after the session is
    /// prepared (OpenBCI channel settings; `loopback_true`, `old_timestamps` for playback);
    /// repeatable, sent in order.
    #[arg(long = "config")]
    pub configs: Vec<String>,
    /// Prefix of the stream names (default: the board's short name, e.g. `synthetic`).
    #[arg(long)]
    pub name: Option<String>,
    /// Samples each stream keeps (default: 10 s of data, at least 65536).
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Stop after this many seconds (default: until Ctrl-C, or the end of a playback file).
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub seconds: Option<f64>,
    /// Keep the streams after the bridge stops (default: removed).
    #[arg(long)]
    pub keep: bool,
    /// Seconds without data after which the board is reported and reconnected.
    #[arg(long, default_value_t = 2.0, value_parser = crate::cmd_demo::seconds)]
    pub stall: f64,
    /// Seconds between reconnection attempts.
    #[arg(long, default_value_t = 1.0, value_parser = crate::cmd_demo::seconds)]
    pub retry: f64,
    /// List the boards (names, ids, the options each needs) and exit.
    #[arg(long)]
    pub list_boards: bool,
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
    #[arg(long, default_value_t = 5.0, value_parser = crate::cmd_demo::seconds)]
    pub timeout: f64,
    /// Samples the stream keeps (default: 10 s of data, at least 65536).
    #[arg(long)]
    pub capacity: Option<u64>,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
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
    #[arg(long, value_parser = crate::cmd_demo::seconds)]
    pub seconds: Option<f64>,
}

/// Run `rtloop bridge ...`.
pub fn run(c: BridgeCommand, g: &Global) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Relaxed));
    }
    if let BridgeCommand::BrainflowIn(a) = c {
        return brainflow_in(*a, &stop, g);
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
        BridgeCommand::BrainflowIn(_) => unreachable!("handled above"),
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

fn secs(what: &str, s: f64) -> anyhow::Result<Duration> {
    match crate::cmd_demo::seconds(&s.to_string()) {
        Ok(s) => Ok(Duration::from_secs_f64(s)),
        Err(e) => anyhow::bail!("--{what}: {e}"),
    }
}

/// Run `rtloop bridge brainflow-in`.
fn brainflow_in(a: BrainflowInArgs, stop: &AtomicBool, g: &Global) -> anyhow::Result<()> {
    use rtloop_brainflow::boards::{Board, BOARDS};
    if a.list_boards {
        if g.json {
            let list: Vec<serde_json::Value> = BOARDS
                .iter()
                .map(|&(name, id)| {
                    let b = Board { id, name };
                    serde_json::json!({"name": name, "id": id,
                        "needs": b.required().iter().map(|(o, _)| o.flag()).collect::<Vec<_>>()})
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&list)?);
        } else {
            for &(name, id) in BOARDS {
                let b = Board { id, name };
                let needs: Vec<&str> = b.required().iter().map(|(o, _)| o.flag()).collect();
                println!("{id:>4}  {name:<34} {}", needs.join(" "));
            }
        }
        return Ok(());
    }
    let mut o = rtloop_brainflow::bridge::InOptions::new(a.board.as_deref().unwrap_or_default());
    o.params = rtloop_brainflow::Params {
        serial_port: a.serial_port.unwrap_or_default(),
        mac_address: a.mac_address.unwrap_or_default(),
        ip_address: a.ip_address.unwrap_or_default(),
        ip_port: a.ip_port.unwrap_or(0),
        ip_protocol: a.ip_protocol,
        other_info: a.other_info.unwrap_or_default(),
        serial_number: a.serial_number.unwrap_or_default(),
        timeout: a.timeout,
        file: a.file.unwrap_or_default(),
        master_board: a.master_board,
    };
    o.configs = a.configs;
    o.prefix = a.name;
    o.capacity = a.capacity;
    o.duration = a.seconds.map(|s| secs("seconds", s)).transpose()?;
    o.remove_at_end = !a.keep;
    o.stall = secs("stall", a.stall)?;
    o.retry = secs("retry", a.retry)?;
    // the board name and options are checked before BrainFlow is loaded
    let board = Board::parse(&o.board)?;
    o.params.check(board)?;
    let bf = rtloop_brainflow::BrainFlow::load()?;
    let version = bf.version();
    let report = rtloop_brainflow::bridge::brainflow_in(&bf, &o, stop, &mut |names| {
        // one line when ready: scripts and tests wait for it
        eprintln!(
            "bridging BrainFlow {board} -> streams {} (BrainFlow {version})",
            names.join(", ")
        );
    })?;
    if g.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} -> {} streams: {} samples, {} markers, {} lost samples, {} outages, {} reconnects; {}",
            report.board,
            report.streams.len(),
            report.samples,
            report.markers,
            report.lost_samples,
            report.outages,
            report.reconnects,
            report.ended
        );
    }
    Ok(())
}
