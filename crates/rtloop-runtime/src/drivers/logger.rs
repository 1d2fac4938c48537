//! `logger` sink: LiCoRICE's SQLite logger, without its limits. Every tick's clocks go to a
//! `ticks` table and each input signal to its own table; the tick path only copies the
//! tick's bytes into a batch, and a writer thread inserts batches in transactions. If the
//! disk cannot keep up, whole batches are dropped and counted — the tick never waits.
//! Table names are derived from signal names and always quoted (no SQL is spliced from
//! user text).

use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use rtloop_stream::DType;
use rusqlite::{params_from_iter, Connection};

use super::{parse_options, DriverCtx, DriverError, InView, Sink, TickInfo};
use crate::model::Signal;

/// Reading a log back: the ticks and every signal as typed values.
pub mod read;

/// `options:` of `logger`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Options {
    /// The SQLite file (relative to the run's output directory). Each run writes its own
    /// file beside it, named with the run's start time, and `path` becomes a link to the
    /// newest (see [`new_log_path`]).
    path: String,
    /// Write `path` itself, replacing what is there (default false: a new file each run).
    #[serde(default)]
    overwrite: bool,
    /// Ticks per transaction (default 100).
    #[serde(default = "default_batch")]
    batch_ticks: usize,
    /// Batches queued for the writer thread before new ones are dropped (default 64).
    #[serde(default = "default_queue")]
    queue_batches: usize,
}

fn default_batch() -> usize {
    100
}
fn default_queue() -> usize {
    64
}

/// Most values per tick stored as one typed column each (more go into a BLOB).
pub const MAX_COLUMNS: usize = 64;

/// Validate `logger` options.
pub fn check(options: &serde_json::Value, signals: &[&Signal]) -> Result<(), String> {
    let o: Options = parse_options(options)?;
    if o.path.trim().is_empty() {
        return Err("path: give the SQLite file to write".into());
    }
    if o.batch_ticks == 0 || o.queue_batches == 0 {
        return Err("batch_ticks and queue_batches must be at least 1".into());
    }
    if signals.is_empty() {
        return Err("reads at least one signal (in: [...])".into());
    }
    let mut seen = std::collections::HashSet::new();
    for s in signals {
        if !seen.insert(table_name(&s.name)) {
            return Err(format!(
                "two signals map to table {:?}; rename one",
                table_name(&s.name)
            ));
        }
    }
    Ok(())
}

/// The table of signal `name`: `sig_` + the name with every character outside
/// `[A-Za-z0-9_]` replaced by `_`.
#[must_use]
pub fn table_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("sig_{clean}")
}

fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

/// How a signal is stored.
#[derive(Clone)]
struct Layout {
    table: String,
    /// One column per value (fixed signals of at most MAX_COLUMNS values per tick).
    columns: Option<usize>,
    dtype: DType,
    row_bytes: usize,
    rows_per_tick: usize,
    /// Most bytes per tick.
    tick_bytes: usize,
    variable: bool,
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F64)
}

/// One value of `dtype` at `b`, as SQLite's REAL or INTEGER.
fn value(d: DType, b: &[u8]) -> rusqlite::types::Value {
    use rusqlite::types::Value as V;
    let a = |n: usize| -> [u8; 8] {
        let mut x = [0u8; 8];
        x[..n].copy_from_slice(&b[..n]);
        x
    };
    match d {
        DType::F32 => V::Real(f64::from(f32::from_ne_bytes(
            b[..4].try_into().unwrap_or_default(),
        ))),
        DType::F64 => V::Real(f64::from_ne_bytes(a(8))),
        DType::U8 => V::Integer(i64::from(b[0])),
        DType::I8 => V::Integer(i64::from(b[0] as i8)),
        DType::U16 => V::Integer(i64::from(u16::from_ne_bytes([b[0], b[1]]))),
        DType::I16 => V::Integer(i64::from(i16::from_ne_bytes([b[0], b[1]]))),
        DType::U32 => V::Integer(i64::from(u32::from_ne_bytes(
            b[..4].try_into().unwrap_or_default(),
        ))),
        DType::I32 => V::Integer(i64::from(i32::from_ne_bytes(
            b[..4].try_into().unwrap_or_default(),
        ))),
        // SQLite integers are i64: a u64 above i64::MAX is stored as its two's complement
        DType::U64 | DType::I64 => V::Integer(i64::from_ne_bytes(a(8))),
    }
}

/// A batch of ticks: the clocks, and per signal (rows, bytes) of each tick.
#[derive(Default)]
struct Batch {
    ticks: Vec<[i64; 5]>,
    rows: Vec<Vec<usize>>,
    bytes: Vec<Vec<u8>>,
}

/// Bytes reserved up front per variable signal in a batch (it grows if a batch needs more;
/// a recycled batch keeps what it grew to).
const VARIABLE_RESERVE: usize = 1 << 20;

impl Batch {
    /// An empty batch with room for `ticks` ticks of `layouts`: fixed signals get all they
    /// will need, variable ones up to [`VARIABLE_RESERVE`] bytes.
    fn with_capacity(ticks: usize, layouts: &[Layout]) -> Self {
        Batch {
            ticks: Vec::with_capacity(ticks),
            rows: layouts.iter().map(|_| Vec::with_capacity(ticks)).collect(),
            bytes: layouts
                .iter()
                .map(|l| {
                    let full = ticks.saturating_mul(l.tick_bytes);
                    Vec::with_capacity(if l.variable {
                        full.min(VARIABLE_RESERVE)
                    } else {
                        full
                    })
                })
                .collect(),
        }
    }
}

/// Open `logger`: creates the file and its tables.
pub fn open(
    options: &serde_json::Value,
    signals: &[Signal],
    ctx: &DriverCtx,
) -> Result<Box<dyn Sink>, DriverError> {
    let o: Options = parse_options(options).map_err(DriverError::Config)?;
    let named = ctx.out_dir.join(&o.path);
    // its directory is made as the recorder makes its `out`: a model that logs to
    // `logs/run.db` runs in a fresh output directory without a step by hand
    if let Some(dir) = named.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| DriverError::io(format!("cannot create {}", dir.display()), e))?;
    }
    let path = if o.overwrite {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", named.display()));
        }
        named
    } else {
        new_log_path(&named, unix_seconds())?
    };
    let db = Connection::open(&path).map_err(|e| DriverError::Database {
        path: path.clone(),
        source: Box::new(e),
        after: "",
    })?;
    let sql = |e: rusqlite::Error| DriverError::Database {
        path: path.clone(),
        source: Box::new(e),
        after: "",
    };
    db.execute_batch(
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
         CREATE TABLE ticks(tick INTEGER PRIMARY KEY, deadline_ns INTEGER, start_ns INTEGER,
                            monotonic_ns INTEGER, realtime_ns INTEGER);
         CREATE TABLE signals(name TEXT PRIMARY KEY, dtype TEXT, shape TEXT,
                              rows_per_tick INTEGER, variable INTEGER, table_name TEXT,
                              channels TEXT, units TEXT);",
    )
    .map_err(sql)?;
    let mut layouts = Vec::new();
    for s in signals {
        let values = s.rows_per_tick() * s.row_len();
        let columns = (!s.variable && values <= MAX_COLUMNS).then_some(values);
        let table = table_name(&s.name);
        let cols = match columns {
            Some(n) => {
                let ty = if is_float(s.dtype) { "REAL" } else { "INTEGER" };
                (0..n).map(|i| format!(", v{i} {ty}")).collect::<String>()
            }
            None => ", rows INTEGER, data BLOB".into(),
        };
        db.execute_batch(&format!(
            "CREATE TABLE {}(tick INTEGER{cols});",
            quote(&table)
        ))
        .map_err(sql)?;
        db.execute(
            "INSERT INTO signals VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            rusqlite::params![
                s.name,
                s.dtype.name(),
                serde_json::to_string(&s.shape).unwrap_or_default(),
                s.rows_per_tick() as i64,
                i64::from(s.variable),
                table,
                serde_json::to_string(&s.channels).unwrap_or_default(),
                serde_json::to_string(&s.units).unwrap_or_default()
            ],
        )
        .map_err(sql)?;
        layouts.push(Layout {
            table,
            columns,
            dtype: s.dtype,
            row_bytes: s.row_bytes(),
            rows_per_tick: s.rows_per_tick(),
            tick_bytes: s.rows_per_tick() * s.row_bytes(),
            variable: s.variable,
        });
    }
    let (tx, rx) = sync_channel::<Batch>(o.queue_batches);
    let (ret_tx, ret_rx) = sync_channel::<Batch>(o.queue_batches + 2);
    let l2 = layouts.clone();
    // the first batch is allocated here, not in the tick; the writer hands batches back
    let current = Batch::with_capacity(o.batch_ticks, &layouts);
    let _ = ret_tx.try_send(Batch::with_capacity(o.batch_ticks, &layouts));
    let writer = std::thread::Builder::new()
        .name("logger".into())
        .spawn(move || {
            // the writer never competes with a tick: plain scheduling, even if the process
            // was made SCHED_FIFO before it started (Linux: pid 0 is this thread)
            let normal = libc::sched_param { sched_priority: 0 };
            // SAFETY: sched_setscheduler reads a valid sched_param; failure changes nothing.
            let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &raw const normal) };
            write_batches(db, &l2, &rx, &ret_tx)
        })
        .map_err(|e| DriverError::io("cannot start the logger thread", e))?;
    Ok(Box::new(Logger {
        path,
        batch_ticks: o.batch_ticks,
        layouts,
        current,
        tx: Some(tx),
        recycled: ret_rx,
        writer: Some(writer),
        dropped: 0,
    }))
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// UTC `YYYYMMDDTHHMMSSZ` of `unix` seconds (Howard Hinnant's civil-from-days).
#[must_use]
pub fn utc_stamp(unix: u64) -> String {
    let (days, secs) = ((unix / 86_400) as i64, unix % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The file this run logs to, for a logger whose `path` is `named`: `STEM-<UTC start
/// time>.EXT` beside it (`-2`, `-3`, ... if that name is taken), created empty here so two
/// runs never share one. `named` becomes a symbolic link to it, so it always opens the
/// newest run's log; a regular file at `named` (an `overwrite: true` log, or one from before
/// runs had their own files) is left as it is, and the summary names the new file.
pub fn new_log_path(named: &std::path::Path, unix: u64) -> Result<PathBuf, DriverError> {
    let dir = named.parent().unwrap_or(std::path::Path::new("."));
    let stem = named
        .file_stem()
        .map_or_else(|| "log".into(), |s| s.to_string_lossy().into_owned());
    let ext = named
        .extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()));
    let stamp = utc_stamp(unix);
    let mut k = 1u32;
    let file = loop {
        let name = if k == 1 {
            format!("{stem}-{stamp}{ext}")
        } else {
            format!("{stem}-{stamp}-{k}{ext}")
        };
        let candidate = dir.join(&name);
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(_) => break name,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => k += 1,
            Err(e) => {
                return Err(DriverError::io(
                    format!("cannot create the log {}", candidate.display()),
                    e,
                ))
            }
        }
    };
    let is_link = std::fs::symlink_metadata(named).is_ok_and(|m| m.file_type().is_symlink());
    if is_link || !named.exists() {
        // a new link renamed over the old one: `named` is never missing or half-made
        let tmp = dir.join(format!(".{file}.link"));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&file, &tmp)
            .and_then(|()| std::fs::rename(&tmp, named))
            .map_err(|e| {
                DriverError::io(format!("cannot link {} to {file}", named.display()), e)
            })?;
    } else {
        tracing::warn!(
            "logger: {} is a file from an earlier run, kept as it is; this run logs to {file}",
            named.display()
        );
    }
    Ok(dir.join(file))
}

fn write_batches(
    mut db: Connection,
    layouts: &[Layout],
    rx: &Receiver<Batch>,
    recycle: &SyncSender<Batch>,
) -> Result<u64, rusqlite::Error> {
    let mut written = 0u64;
    let inserts: Vec<String> = layouts
        .iter()
        .map(|l| {
            let n = l.columns.map_or(3, |c| c + 1);
            let marks = (1..=n)
                .map(|i| format!("?{i}"))
                .collect::<Vec<_>>()
                .join(", ");
            format!("INSERT INTO {} VALUES ({marks})", quote(&l.table))
        })
        .collect();
    while let Ok(mut batch) = rx.recv() {
        let tx = db.transaction()?;
        {
            let mut ticks = tx.prepare_cached("INSERT INTO ticks VALUES (?1, ?2, ?3, ?4, ?5)")?;
            for t in &batch.ticks {
                ticks.execute(rusqlite::params![t[0], t[1], t[2], t[3], t[4]])?;
            }
            for (s, l) in layouts.iter().enumerate() {
                let mut st = tx.prepare_cached(&inserts[s])?;
                let mut off = 0;
                for (k, t) in batch.ticks.iter().enumerate() {
                    let rows = batch.rows[s][k];
                    let len = rows * l.row_bytes;
                    let b = &batch.bytes[s][off..off + len];
                    off += len;
                    match l.columns {
                        Some(_) => {
                            let w = l.dtype.itemsize();
                            let vals = std::iter::once(rusqlite::types::Value::Integer(t[0]))
                                .chain(b.chunks_exact(w).map(|c| value(l.dtype, c)));
                            st.execute(params_from_iter(vals))?;
                        }
                        None => {
                            st.execute(rusqlite::params![t[0], rows as i64, b])?;
                        }
                    }
                }
            }
        }
        tx.commit()?;
        written += batch.ticks.len() as u64;
        batch.ticks.clear();
        for r in &mut batch.rows {
            r.clear();
        }
        for b in &mut batch.bytes {
            b.clear();
        }
        let _ = recycle.try_send(batch);
    }
    Ok(written)
}

struct Logger {
    path: PathBuf,
    batch_ticks: usize,
    layouts: Vec<Layout>,
    current: Batch,
    tx: Option<SyncSender<Batch>>,
    recycled: Receiver<Batch>,
    writer: Option<JoinHandle<Result<u64, rusqlite::Error>>>,
    dropped: u64,
}

impl Logger {
    fn send(&mut self) {
        if self.current.ticks.is_empty() {
            return;
        }
        // reuse a batch the writer is done with: no allocation unless the writer is behind
        let next = self
            .recycled
            .try_recv()
            .unwrap_or_else(|_| Batch::with_capacity(self.batch_ticks, &self.layouts));
        let batch = std::mem::replace(&mut self.current, next);
        let n = batch.ticks.len() as u64;
        match self.tx.as_ref().map(|t| t.try_send(batch)) {
            Some(Ok(())) => {}
            // the queue is full (the disk is behind) or the writer stopped (an error,
            // reported by finish): the batch is dropped, never waited for
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => {
                self.dropped += n;
            }
        }
    }
}

impl Sink for Logger {
    fn tick(&mut self, t: &TickInfo, inputs: &[InView<'_>]) -> Result<(), DriverError> {
        let b = &mut self.current;
        b.ticks.push([
            t.tick as i64,
            t.deadline_ns as i64,
            t.start_ns as i64,
            t.monotonic_ns as i64,
            t.realtime_ns as i64,
        ]);
        for (s, l) in self.layouts.iter().enumerate() {
            // never more rows than the signal has, nor than its bytes hold; a missing
            // input logs as 0 rows
            let rows = inputs.get(s).map_or(0, |i| {
                let held = i.bytes.len().checked_div(l.row_bytes).unwrap_or(i.rows);
                i.rows.min(l.rows_per_tick).min(held)
            });
            let dst = &mut b.bytes[s];
            if let Some(i) = inputs.get(s) {
                dst.extend_from_slice(&i.bytes[..rows * l.row_bytes]);
            }
            // a fixed signal stored as columns has all its values every tick
            let rows = if l.columns.is_some() {
                dst.resize(dst.len() + (l.rows_per_tick - rows) * l.row_bytes, 0);
                l.rows_per_tick
            } else {
                rows
            };
            b.rows[s].push(rows);
        }
        if b.ticks.len() >= self.batch_ticks {
            self.send();
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<String, DriverError> {
        self.send();
        self.tx = None; // the writer thread ends when the queue is drained
        let result = self.writer.take().map(std::thread::JoinHandle::join);
        match result {
            Some(Err(_)) => Err(DriverError::Panicked("logger")),
            Some(Ok(Err(e))) => Err(DriverError::Database {
                path: self.path.clone(),
                source: Box::new(e),
                after: " (ticks committed before it stay readable)",
            }),
            Some(Ok(Ok(written))) => Ok(format!(
                "logged {written} ticks to {} ({} dropped)",
                self.path.display(),
                self.dropped
            )),
            // finish() called again
            None => Ok(String::new()),
        }
    }
}
