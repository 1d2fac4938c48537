//! `brainflow` (source): a BrainFlow board inside a model (libBoardController from the
//! brainflow wheel; docs/brainflow.md). Each output signal is one kind of the board's data,
//! named like the bridge's streams (`eeg`, `accel`, `board`, `aux.accel`, ...): by the
//! signal's name, or by `kinds:` in the order of `out:`. A tick takes every sample that
//! arrived since the last one (up to the signal's rows; the rest stays in BrainFlow's buffer
//! for the next tick), never waiting. A board silent for `stall` seconds is reported and its
//! session prepared again on a helper thread, so the tick never blocks on the device.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rtloop_brainflow::boards::{Board, Params, PLAYBACK_FILE_BOARD};
use rtloop_brainflow::bridge::{lost_between, presets_of};
use rtloop_brainflow::{BrainFlow, BrainFlowError, PresetLayout, Session};
use rtloop_stream::DType;

use super::{parse_options, DriverCtx, DriverError, OutBuf, Source, TickInfo};
use crate::model::Signal;

/// `options:` of `brainflow`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The board, by name or id.
    board: String,
    #[serde(default)]
    serial_port: String,
    #[serde(default)]
    mac_address: String,
    #[serde(default)]
    ip_address: String,
    #[serde(default)]
    ip_port: u16,
    ip_protocol: Option<String>,
    #[serde(default)]
    other_info: String,
    #[serde(default)]
    serial_number: String,
    #[serde(default)]
    timeout: u32,
    #[serde(default)]
    file: String,
    master_board: Option<String>,
    /// Strings sent with config_board after the session is prepared.
    #[serde(default)]
    config: Vec<String>,
    /// The kind each output signal carries, in the order of `out:` (default: each signal's
    /// name).
    kinds: Option<Vec<String>>,
    /// Seconds without data before the board is reported and reconnected (default 2).
    #[serde(default = "default_stall")]
    stall: f64,
}

fn default_stall() -> f64 {
    2.0
}

impl Options {
    fn params(&self) -> Params {
        Params {
            serial_port: self.serial_port.clone(),
            mac_address: self.mac_address.clone(),
            ip_address: self.ip_address.clone(),
            ip_port: self.ip_port,
            ip_protocol: self.ip_protocol.clone(),
            other_info: self.other_info.clone(),
            serial_number: self.serial_number.clone(),
            timeout: self.timeout,
            file: self.file.clone(),
            master_board: self.master_board.clone(),
        }
    }
}

fn kinds_of(o: &Options, names: &[&str]) -> Result<Vec<String>, String> {
    match &o.kinds {
        Some(k) if k.len() != names.len() => Err(format!(
            "kinds: {} kinds for {} signals; one per signal of out:, in order",
            k.len(),
            names.len()
        )),
        Some(k) => Ok(k.clone()),
        None => Ok(names.iter().map(|n| (*n).to_string()).collect()),
    }
}

/// Validate `brainflow` options: a known board with the options it needs, one or more
/// variable float64 `[max, channels]` signals.
pub fn check(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: Options = parse_options(options)?;
    let board = Board::parse(&o.board).map_err(|e| e.to_string())?;
    o.params().check(board).map_err(|e| e.to_string())?;
    if !(o.stall.is_finite() && o.stall > 0.0) {
        return Err(format!("stall {}: seconds > 0", o.stall));
    }
    if signals.is_empty() {
        return Err("writes one signal per kind of data (out: [eeg, ...])".into());
    }
    for s in signals {
        if !s.variable || s.shape.len() != 2 || s.dtype != DType::F64 {
            return Err(format!(
                "signal {:?} must be float64 with variable: true and shape [max_samples_per_tick, \
                 channels] (samples arrive at the board's pace, not the tick's; BrainFlow gives \
                 float64)",
                s.name
            ));
        }
    }
    let names: Vec<&str> = signals.iter().map(|s| s.name.as_str()).collect();
    kinds_of(&o, &names).map(|_| ())
}

struct Target {
    preset_index: usize,
    rows: Vec<usize>,
}

struct BrainflowIn {
    board: Board,
    session: Arc<Mutex<Session>>,
    layouts: Vec<PresetLayout>,
    targets: Vec<Target>,
    buf: Vec<f64>,
    last_package: Vec<Option<f64>>,
    samples: u64,
    lost: u64,
    outages: u64,
    reconnects: Arc<std::sync::atomic::AtomicU64>,
    stall: Duration,
    last_data: Instant,
    reconnecting: Option<std::thread::JoinHandle<()>>,
    stop: Arc<AtomicBool>,
}

fn err(e: BrainFlowError) -> DriverError {
    DriverError::BrainFlow(e)
}

/// Open `brainflow`: loads BrainFlow, prepares and starts the session; each signal's
/// channels must be its kind's.
pub fn open(
    options: &serde_json::Value,
    signals: &[Signal],
    _ctx: &DriverCtx,
) -> Result<Box<dyn Source>, DriverError> {
    let o: Options = parse_options(options).map_err(DriverError::Config)?;
    let board = Board::parse(&o.board).map_err(err)?;
    let params = o.params();
    let data_board = params.check(board).map_err(err)?.unwrap_or(board);
    let bf = BrainFlow::load().map_err(err)?;
    let layouts = bf.layout(data_board, presets_of(board)).map_err(err)?;
    let names: Vec<&str> = signals.iter().map(|s| s.name.as_str()).collect();
    let kinds = kinds_of(&o, &names).map_err(DriverError::Config)?;
    let mut targets = Vec::new();
    for (s, kind) in signals.iter().zip(&kinds) {
        let found = layouts.iter().enumerate().find_map(|(i, l)| {
            l.streams
                .iter()
                .find(|k| &k.suffix == kind)
                .map(|k| (i, k.rows.clone()))
        });
        let Some((preset_index, rows)) = found else {
            let allowed: Vec<&str> = layouts
                .iter()
                .flat_map(|l| l.streams.iter().map(|k| k.suffix.as_str()))
                .collect();
            return Err(err(BrainFlowError::UnknownKind {
                board: board.to_string(),
                kind: kind.clone(),
                allowed: allowed.join(", "),
            }));
        };
        if rows.len() != s.row_len() {
            return Err(DriverError::Config(format!(
                "signal {:?} has {} channels; {kind} of board {board} has {}",
                s.name,
                s.row_len(),
                rows.len()
            )));
        }
        targets.push(Target { preset_index, rows });
    }
    let buffer = rtloop_brainflow::buffer_samples(&layouts);
    let session = Session::open(bf, board, &params, &o.config, buffer).map_err(err)?;
    let n_presets = layouts.len();
    Ok(Box::new(BrainflowIn {
        board,
        session: Arc::new(Mutex::new(session)),
        layouts,
        targets,
        buf: Vec::new(),
        last_package: vec![None; n_presets],
        samples: 0,
        lost: 0,
        outages: 0,
        reconnects: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        stall: Duration::from_secs_f64(o.stall),
        last_data: Instant::now(),
        reconnecting: None,
        stop: Arc::new(AtomicBool::new(false)),
    }))
}

impl BrainflowIn {
    /// Prepare the session again on a helper thread, every second until it starts.
    fn reconnect(&mut self, why: &str) {
        self.outages += 1;
        if self.board.id == PLAYBACK_FILE_BOARD {
            // restarting would play the file again from its start
            tracing::warn!("{why}; the playback board is not restarted");
            return;
        }
        tracing::warn!(
            "{why}: it stopped or disconnected; what was received stays in the model's \
             signals; preparing the session again every 1 s"
        );
        let (session, stop, board, reconnects) = (
            self.session.clone(),
            self.stop.clone(),
            self.board,
            self.reconnects.clone(),
        );
        self.reconnecting = Some(std::thread::spawn(move || {
            let mut attempt = 0u64;
            while !stop.load(Ordering::Relaxed) {
                attempt += 1;
                let r = session
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .restart();
                match r {
                    Ok(()) => {
                        reconnects.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!("board {board} is back (attempt {attempt})");
                        return;
                    }
                    Err(e) if attempt == 1 || attempt % 10 == 0 => {
                        tracing::warn!("board {board}: attempt {attempt} to reconnect: {e}");
                    }
                    Err(_) => {}
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        }));
    }
}

impl Source for BrainflowIn {
    fn tick(&mut self, _t: &TickInfo, out: &mut [OutBuf<'_>]) -> Result<(), DriverError> {
        for o in out.iter_mut() {
            o.rows = 0;
        }
        if let Some(h) = &self.reconnecting {
            if !h.is_finished() {
                return Ok(());
            }
            self.reconnecting = None;
            self.last_data = Instant::now();
            // the samples lost in the outage are the outage; package numbers start again
            self.last_package.iter_mut().for_each(|p| *p = None);
        }
        let Ok(session) = self.session.try_lock() else {
            return Ok(());
        };
        let mut got = 0usize;
        let mut failed = None;
        for (p, l) in self.layouts.iter().enumerate() {
            let max = self
                .targets
                .iter()
                .zip(out.iter())
                .filter(|(t, _)| t.preset_index == p)
                .map(|(_, o)| o.signal.rows_per_tick())
                .min();
            let Some(max) = max else { continue };
            let n = match session.count(l.preset) {
                Ok(n) => n.min(max),
                Err(e) => {
                    failed = Some(e.to_string());
                    break;
                }
            };
            if n == 0 {
                continue;
            }
            if let Err(e) = session.take(l.preset, n, l.num_rows, &mut self.buf) {
                failed = Some(e.to_string());
                break;
            }
            for (t, o) in self.targets.iter().zip(out.iter_mut()) {
                if t.preset_index != p {
                    continue;
                }
                let ch = t.rows.len();
                for i in 0..n {
                    for (c, &r) in t.rows.iter().enumerate() {
                        let at = (i * ch + c) * 8;
                        o.bytes[at..at + 8].copy_from_slice(&self.buf[r * n + i].to_ne_bytes());
                    }
                }
                o.rows = n;
            }
            if let Some(r) = l.package_row {
                for i in 0..n {
                    let cur = self.buf[r * n + i];
                    if let Some(prev) = self.last_package[p] {
                        self.lost += lost_between(prev, cur);
                    }
                    self.last_package[p] = Some(cur);
                }
            }
            if p == 0 {
                self.samples += n as u64;
            }
            got += n;
        }
        drop(session);
        if got > 0 {
            self.last_data = Instant::now();
        } else if failed.is_some() || self.last_data.elapsed() >= self.stall {
            let why = failed.unwrap_or_else(|| {
                format!(
                    "no data from board {} for {:.1} s",
                    self.board,
                    self.stall.as_secs_f64()
                )
            });
            self.last_data = Instant::now();
            self.reconnect(&why);
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.reconnecting.take() {
            let _ = h.join();
        }
        self.session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .release();
        Ok(format!(
            "received {} samples from BrainFlow {}: {} lost, {} outages, {} reconnects",
            self.samples,
            self.board,
            self.lost,
            self.outages,
            self.reconnects.load(Ordering::Relaxed)
        ))
    }
}
