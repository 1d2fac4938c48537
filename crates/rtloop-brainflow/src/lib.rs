//! # rtloop-brainflow
//!
//! Any BrainFlow board into rtloop streams. BrainFlow's BoardController library is not
//! compiled in: the `brainflow` wheel on PyPI bundles it (`brainflow/lib/libBoardController.so`)
//! and rtloop-native loads it at run time from, in order, `$RTLOOP_LIBBOARDCONTROLLER`, the
//! wheel of the Python that runs rtloop (`$RTLOOP_PYTHON`, else `python3`), or the system's
//! `libBoardController.so`. rtloop without BrainFlow still builds and runs.
//!
//! [`boards`] names boards and the options each needs, [`layout`] maps a board's description
//! onto streams (one per kind of data), [`Session`] is one prepared, streaming BrainFlow
//! session, and [`bridge::brainflow_in`] writes a board's data into streams, reconnecting
//! when the board stops delivering.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod boards;
pub mod bridge;
pub mod ffi;
pub mod layout;

use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use boards::{Board, Params};
pub use layout::{KindStream, PresetLayout};

/// Why BrainFlow could not be used.
#[derive(Debug, thiserror::Error)]
pub enum BrainFlowError {
    /// libBoardController was not found or could not be loaded.
    #[error(transparent)]
    NotFound(#[from] rtloop_native::NotFound),
    /// A board name or id BrainFlow does not have.
    #[error("unknown BrainFlow board {given:?}; use a name as BrainFlow spells it (any case, with or without _BOARD) or its id, e.g. {examples} ({count} boards in all: `rtloop bridge brainflow-in --list-boards`)")]
    UnknownBoard {
        /// What was given.
        given: String,
        /// Some names it could be.
        examples: String,
        /// How many boards there are.
        count: usize,
    },
    /// A board started without an option it cannot do without.
    #[error("board {board} needs {option}: {why}")]
    MissingOption {
        /// The board.
        board: String,
        /// The option (`--serial-port`).
        option: &'static str,
        /// What it is.
        why: &'static str,
    },
    /// An option with a value that cannot work.
    #[error("{0}")]
    BadOption(String),
    /// A playback file BrainFlow could not play.
    #[error("playback file {path}: {reason}")]
    BadPlaybackFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A BrainFlow call failed.
    #[error("BrainFlow {call} failed for board {board}: {code_name} ({code}){hint}")]
    Call {
        /// The C function.
        call: &'static str,
        /// The board.
        board: String,
        /// BrainFlow's exit code.
        code: i32,
        /// Its name (`UNABLE_TO_OPEN_PORT_ERROR`).
        code_name: &'static str,
        /// What usually causes it.
        hint: String,
    },
    /// A board description BrainFlow gave that rtloop cannot map.
    #[error("BrainFlow's board description: {0}")]
    Descriptor(String),
    /// A kind of data the board does not have.
    #[error("board {board} has no {kind:?} data; it has: {allowed}")]
    UnknownKind {
        /// The board.
        board: String,
        /// What was asked for.
        kind: String,
        /// The kinds it has.
        allowed: String,
    },
    /// A stream could not be created or written.
    #[error("stream {name:?}: {source}")]
    Stream {
        /// The stream.
        name: String,
        /// What went wrong.
        #[source]
        source: Box<rtloop_stream::Error>,
    },
}

impl BrainFlowError {
    /// A stream error, naming the stream.
    pub fn stream(name: impl Into<String>, source: impl Into<rtloop_stream::Error>) -> Self {
        BrainFlowError::Stream {
            name: name.into(),
            source: Box::new(source.into()),
        }
    }
}

/// libBoardController, loaded.
pub struct BrainFlow {
    api: ffi::Api,
    /// Where it was loaded from.
    pub path: PathBuf,
}

/// Where libBoardController is found: `$RTLOOP_LIBBOARDCONTROLLER`, the brainflow wheel, the
/// system's library.
pub const LIBBOARDCONTROLLER: rtloop_native::Library = rtloop_native::Library {
    name: "libBoardController",
    env: "RTLOOP_LIBBOARDCONTROLLER",
    wheel: "brainflow",
    locate: "import os, importlib.util as u; s = u.find_spec('brainflow'); print(os.path.join(os.path.dirname(s.origin), 'lib', 'libBoardController.so'))",
    system: &["libBoardController.so"],
    install: "brainflow (`pip install brainflow`, which bundles libBoardController)",
};

fn call_err(call: &'static str, board: Board, code: i32) -> BrainFlowError {
    let hint = match code {
        1 => ": another program has the port open (the OpenBCI GUI, a second rtloop?)",
        2 | 3 => ": check the serial port name and that this user may open it (group dialout)",
        6 | 7 => ": the board did not answer: is it switched on, paired, in range?",
        13 => ": an option is missing or wrong for this board (see docs/brainflow.md)",
        16 => ": a session of this board with these options is already open in this process",
        18 => ": the board did not answer in time",
        _ => "",
    };
    BrainFlowError::Call {
        call,
        board: board.to_string(),
        code,
        code_name: ffi::exit_code_name(code),
        hint: hint.to_string(),
    }
}

fn text_from(buf: &[u8], len: i32) -> String {
    let n = usize::try_from(len).unwrap_or(0).min(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

impl BrainFlow {
    /// Find and load libBoardController.
    pub fn load() -> Result<Arc<BrainFlow>, BrainFlowError> {
        // SAFETY: BoardController's initialisers only set up its own state (its logger), and
        // `ffi::Api` is declared from board_controller.h.
        let (api, path) = unsafe { LIBBOARDCONTROLLER.load(ffi::Api::load) }?;
        let bf = BrainFlow { api, path };
        // BrainFlow's own log: errors and warnings on stderr (its default prints info too)
        // SAFETY: an integer level; the call only sets the logger's level.
        unsafe { (bf.api.set_log_level_board_controller)(3) };
        Ok(Arc::new(bf))
    }

    /// BrainFlow's version (`5.23.0`).
    #[must_use]
    pub fn version(&self) -> String {
        let mut buf = [0u8; 64];
        let mut len = 0i32;
        // SAFETY: a 64-byte buffer and its size; BrainFlow writes at most that many bytes and
        // the length into `len`.
        let rc = unsafe {
            (self.api.get_version_board_controller)(buf.as_mut_ptr().cast::<c_char>(), &mut len, 64)
        };
        if rc == 0 {
            text_from(&buf, len)
        } else {
            String::from("unknown")
        }
    }

    /// The presets (buffers) a board fills.
    pub fn presets(&self, board: Board) -> Result<Vec<i32>, BrainFlowError> {
        let mut buf = [0i32; 16];
        let mut n = 0i32;
        // SAFETY: room for 16 presets (BrainFlow has 3); BrainFlow writes the count into `n`.
        let rc = unsafe { (self.api.get_board_presets)(board.id, buf.as_mut_ptr(), &mut n) };
        if rc != 0 {
            return Err(call_err("get_board_presets", board, rc));
        }
        let mut v = buf[..usize::try_from(n).unwrap_or(0).min(16)].to_vec();
        v.sort_unstable();
        Ok(v)
    }

    /// A board's description of one preset (BrainFlow's JSON).
    pub fn descr(&self, board: Board, preset: i32) -> Result<serde_json::Value, BrainFlowError> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut len = 0i32;
        // SAFETY: a buffer of the size passed; BrainFlow writes at most that many bytes and
        // the length into `len`.
        let rc = unsafe {
            (self.api.get_board_descr)(
                board.id,
                preset,
                buf.as_mut_ptr().cast::<c_char>(),
                &mut len,
                buf.len() as i32,
            )
        };
        if rc != 0 {
            return Err(call_err("get_board_descr", board, rc));
        }
        serde_json::from_str(&text_from(&buf, len))
            .map_err(|e| BrainFlowError::Descriptor(format!("{board}: {e}")))
    }

    /// Put a marker into the next sample of `preset` of the session of `board` with `params`
    /// open anywhere in this process (BrainFlow names sessions by board and parameters): how
    /// a stimulus program that shares the process marks its events. Not 0.
    pub fn insert_marker(
        &self,
        board: Board,
        params: &Params,
        value: f64,
        preset: i32,
    ) -> Result<(), BrainFlowError> {
        let master = params.check(board)?;
        let json = CString::new(params.to_json(master))
            .map_err(|_| BrainFlowError::BadOption("an option holds a NUL byte".into()))?;
        // SAFETY: plain values, the board id and a NUL-terminated JSON that lives for the call.
        let rc = unsafe { (self.api.insert_marker)(value, preset, board.id, json.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(call_err("insert_marker", board, rc))
        }
    }

    /// End the session of `board` with `params` open anywhere in this process (BrainFlow's
    /// `release_session`; BrainFlow names sessions by board and parameters). Whoever reads it
    /// sees a board that disconnected: the bridge reports it and prepares it again.
    pub fn release(&self, board: Board, params: &Params) -> Result<(), BrainFlowError> {
        let master = params.check(board)?;
        let json = CString::new(params.to_json(master))
            .map_err(|_| BrainFlowError::BadOption("an option holds a NUL byte".into()))?;
        // SAFETY: the board id and a NUL-terminated JSON that lives for the call.
        let rc = unsafe { (self.api.release_session)(board.id, json.as_ptr()) };
        if rc == 0 {
            Ok(())
        } else {
            Err(call_err("release_session", board, rc))
        }
    }

    /// Every preset of a board as streams. `presets` limits them (None: all the board has).
    pub fn layout(
        &self,
        board: Board,
        presets: Option<&[i32]>,
    ) -> Result<Vec<PresetLayout>, BrainFlowError> {
        let mut taken = Vec::new();
        let mut out = Vec::new();
        for p in self.presets(board)? {
            if presets.is_some_and(|only| !only.contains(&p)) {
                continue;
            }
            let d = self.descr(board, p)?;
            out.push(layout::preset_layout(p, &d, &mut taken)?);
        }
        Ok(out)
    }
}

/// A playback file as BrainFlow's playback board reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaybackFile {
    /// Samples (lines with values).
    pub samples: u64,
    /// The marker column of each sample (empty without a marker row).
    pub markers: Vec<f64>,
}

/// Check a playback file as BrainFlow's playback board reads it (one sample a line, values
/// separated by tabs, or commas in a line without a tab) against the rows of its master
/// board's default preset, and keep its marker column (`marker_row`): BrainFlow's playback
/// board replaces it with the markers inserted while playing, so rtloop puts the file's back.
/// BrainFlow itself skips a line of the wrong length with a log line, which would shift every
/// later sample: refused here instead.
pub fn check_playback_file(
    path: &Path,
    num_rows: usize,
    marker_row: Option<usize>,
) -> Result<PlaybackFile, BrainFlowError> {
    let bad = |reason: String| BrainFlowError::BadPlaybackFile {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let text = String::from_utf8_lossy(&text);
    let mut n = 0u64;
    let mut markers = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let sep = if line.contains('\t') { '\t' } else { ',' };
        let values: Vec<&str> = line.split(sep).filter(|v| !v.trim().is_empty()).collect();
        if values.len() != num_rows {
            return Err(bad(format!(
                "line {} has {} values; the master board's data has {num_rows} rows (is \
                 --master-board the board that recorded it?)",
                i + 1,
                values.len()
            )));
        }
        let mut parsed = Vec::with_capacity(num_rows);
        for v in &values {
            match v.trim().parse::<f64>() {
                Ok(x) => parsed.push(x),
                Err(_) => return Err(bad(format!("line {}: {v:?} is not a number", i + 1))),
            }
        }
        if let Some(r) = marker_row {
            markers.push(parsed[r]);
        }
        n += 1;
    }
    if n == 0 {
        return Err(bad("it holds no samples".into()));
    }
    Ok(PlaybackFile {
        samples: n,
        markers,
    })
}

/// One prepared, streaming BrainFlow session. Released when dropped.
pub struct Session {
    bf: Arc<BrainFlow>,
    /// The board.
    pub board: Board,
    /// The board whose data format it has (the master board of a playback or streaming
    /// board, else the board).
    pub data_board: Board,
    json: CString,
    configs: Vec<String>,
    buffer: i32,
    live: bool,
}

// SAFETY: BrainFlow's C API serialises every call on its own lock and names sessions by
// board id and parameters, so a session may be used from any thread.
unsafe impl Send for Session {}
// SAFETY: as above: every call goes through BrainFlow's lock.
unsafe impl Sync for Session {}

/// Samples BrainFlow's own buffer holds for a board with these presets: 10 minutes of the
/// fastest preset and at least 45000, so data the bridge or a model has not fetched yet
/// survives a long pause (the bridge and the runtime's driver size it the same way).
#[must_use]
pub fn buffer_samples(layouts: &[PresetLayout]) -> usize {
    layouts
        .iter()
        .map(|l| (l.rate * 600.0) as usize)
        .max()
        .unwrap_or(0)
        .max(45_000)
}

impl Session {
    /// Prepare a session, send each of `configs` (`config_board`), start streaming into
    /// BrainFlow's buffer of `buffer` samples.
    pub fn open(
        bf: Arc<BrainFlow>,
        board: Board,
        params: &Params,
        configs: &[String],
        buffer: usize,
    ) -> Result<Session, BrainFlowError> {
        let master = params.check(board)?;
        let json = CString::new(params.to_json(master))
            .map_err(|_| BrainFlowError::BadOption("an option holds a NUL byte".into()))?;
        let mut s = Session {
            bf,
            board,
            data_board: master.unwrap_or(board),
            json,
            configs: configs.to_vec(),
            buffer: i32::try_from(buffer.max(1)).unwrap_or(i32::MAX),
            live: false,
        };
        s.start()?;
        Ok(s)
    }

    fn check(&self, call: &'static str, rc: i32) -> Result<(), BrainFlowError> {
        if rc == 0 {
            Ok(())
        } else {
            Err(call_err(call, self.board, rc))
        }
    }

    fn start(&mut self) -> Result<(), BrainFlowError> {
        let a = &self.bf.api;
        // SAFETY: the board id and a NUL-terminated JSON that lives as long as `self`.
        let rc = unsafe { (a.prepare_session)(self.board.id, self.json.as_ptr()) };
        self.check("prepare_session", rc)?;
        self.live = true;
        for c in &self.configs {
            let cmd = CString::new(c.as_str())
                .map_err(|_| BrainFlowError::BadOption("a config holds a NUL byte".into()))?;
            let mut resp = vec![0u8; 4096];
            let mut len = 0i32;
            // SAFETY: NUL-terminated strings, and a response buffer of the size passed.
            let rc = unsafe {
                (a.config_board)(
                    cmd.as_ptr(),
                    resp.as_mut_ptr().cast::<c_char>(),
                    &mut len,
                    resp.len() as i32,
                    self.board.id,
                    self.json.as_ptr(),
                )
            };
            if rc != 0 {
                self.release();
                return Err(call_err("config_board", self.board, rc));
            }
            let r = text_from(&resp, len);
            if !r.trim().is_empty() {
                tracing::info!("board {} answered {c:?} with {:?}", self.board, r.trim());
            }
        }
        // SAFETY: no streamer (NULL), the board id and its JSON.
        let rc = unsafe {
            (a.start_stream)(
                self.buffer,
                std::ptr::null(),
                self.board.id,
                self.json.as_ptr(),
            )
        };
        if rc != 0 {
            self.release();
            return Err(call_err("start_stream", self.board, rc));
        }
        Ok(())
    }

    /// Release the session and prepare, configure and start it again (a board that stopped
    /// delivering or disconnected).
    pub fn restart(&mut self) -> Result<(), BrainFlowError> {
        self.release();
        self.start()
    }

    /// Release the session (stops streaming); a released session answers no data.
    pub fn release(&mut self) {
        if self.live {
            // SAFETY: the board id and its JSON; releasing also stops the stream.
            unsafe { (self.bf.api.release_session)(self.board.id, self.json.as_ptr()) };
            self.live = false;
        }
    }

    /// Samples waiting in BrainFlow's buffer of `preset`.
    pub fn count(&self, preset: i32) -> Result<usize, BrainFlowError> {
        let mut n = 0i32;
        // SAFETY: one int for the count; the board id and its JSON.
        let rc = unsafe {
            (self.bf.api.get_board_data_count)(preset, &mut n, self.board.id, self.json.as_ptr())
        };
        self.check("get_board_data_count", rc)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Take `n` samples of `preset` out of BrainFlow's buffer into `data`, as BrainFlow
    /// gives them: row-major (`data[row * n + i]` is row `row` of sample `i`), `num_rows`
    /// rows. Call with `n <=` [`Session::count`].
    pub fn take(
        &self,
        preset: i32,
        n: usize,
        num_rows: usize,
        data: &mut Vec<f64>,
    ) -> Result<(), BrainFlowError> {
        data.clear();
        data.resize(n * num_rows, 0.0);
        if n == 0 {
            return Ok(());
        }
        // SAFETY: `data` holds n * num_rows doubles, what BrainFlow writes for n samples of
        // this preset (num_rows from its own description); the board id and its JSON.
        let rc = unsafe {
            (self.bf.api.get_board_data)(
                i32::try_from(n).unwrap_or(i32::MAX),
                preset,
                data.as_mut_ptr(),
                self.board.id,
                self.json.as_ptr(),
            )
        };
        self.check("get_board_data", rc)
    }

    /// Put a marker into the next sample of `preset` (BrainFlow's `insert_marker`; not 0).
    pub fn insert_marker(&self, value: f64, preset: i32) -> Result<(), BrainFlowError> {
        // SAFETY: plain values, the board id and its JSON.
        let rc = unsafe {
            (self.bf.api.insert_marker)(value, preset, self.board.id, self.json.as_ptr())
        };
        self.check("insert_marker", rc)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.release();
    }
}
