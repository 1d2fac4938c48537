//! Reading a log the `logger` sink wrote. The writer beside it owns the log's tables; this
//! reader is the one other place that knows them, so the Python package (and any other
//! reader) gets typed values instead of writing SQL of its own. It reads logs written before
//! signals had `channels` and `units` columns too.

use std::path::{Path, PathBuf};

use rtloop_stream::DType;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use super::quote;

/// Why a log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LogReadError {
    /// There is no file at the path.
    #[error("no runtime log at {}", path.display())]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// The file is not a runtime log: not SQLite, or its tables are missing or damaged.
    #[error("{} is not a runtime log (the logger sink writes one): {why}", path.display())]
    NotALog {
        /// The file.
        path: PathBuf,
        /// What is missing or damaged.
        why: String,
    },
}

/// The `ticks` table, one entry per logged tick in tick order (CLOCK_MONOTONIC ns, but
/// `realtime_ns`: CLOCK_REALTIME ns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoggedTicks {
    /// Tick number.
    pub tick: Vec<i64>,
    /// The tick's deadline (its nominal start).
    pub deadline_ns: Vec<i64>,
    /// When the timer started it.
    pub start_ns: Vec<i64>,
    /// When the logger's process began it.
    pub monotonic_ns: Vec<i64>,
    /// CLOCK_REALTIME when the logger's process began it.
    pub realtime_ns: Vec<i64>,
}

/// A signal's values, in the signal's dtype.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // one variant per dtype, named as DType's
pub enum Values {
    U8(Vec<u8>),
    U16(Vec<u16>),
    U32(Vec<u32>),
    U64(Vec<u64>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Values {
    /// The values of `bytes`, native-endian values of `dtype` one after another (the
    /// logger's BLOBs); `bytes.len()` is a multiple of the dtype's size.
    fn from_ne_bytes(dtype: DType, bytes: &[u8]) -> Values {
        macro_rules! each {
            ($t:ty, $variant:ident) => {
                Values::$variant(
                    bytes
                        .chunks_exact(std::mem::size_of::<$t>())
                        .map(|c| {
                            let mut a = [0u8; std::mem::size_of::<$t>()];
                            a.copy_from_slice(c);
                            <$t>::from_ne_bytes(a)
                        })
                        .collect(),
                )
            };
        }
        match dtype {
            DType::U8 => each!(u8, U8),
            DType::U16 => each!(u16, U16),
            DType::U32 => each!(u32, U32),
            DType::U64 => each!(u64, U64),
            DType::I8 => each!(i8, I8),
            DType::I16 => each!(i16, I16),
            DType::I32 => each!(i32, I32),
            DType::I64 => each!(i64, I64),
            DType::F32 => each!(f32, F32),
            DType::F64 => each!(f64, F64),
        }
    }

    fn new(dtype: DType) -> Values {
        Values::from_ne_bytes(dtype, &[])
    }

    /// Append one value of a signal table's column (the writer stores REAL for float
    /// dtypes, INTEGER for the others: a uint64 above i64::MAX as its two's complement,
    /// which `as` turns back). `false` if the cell holds no number.
    fn push_cell(&mut self, cell: ValueRef<'_>) -> bool {
        let (int, real) = match cell {
            ValueRef::Integer(i) => (i, i as f64),
            ValueRef::Real(r) => (r as i64, r),
            _ => return false,
        };
        match self {
            Values::U8(v) => v.push(int as u8),
            Values::U16(v) => v.push(int as u16),
            Values::U32(v) => v.push(int as u32),
            Values::U64(v) => v.push(int as u64),
            Values::I8(v) => v.push(int as i8),
            Values::I16(v) => v.push(int as i16),
            Values::I32(v) => v.push(int as i32),
            Values::I64(v) => v.push(int),
            Values::F32(v) => v.push(real as f32),
            Values::F64(v) => v.push(real),
        }
        true
    }

    /// How many values.
    #[must_use]
    pub fn len(&self) -> usize {
        match self {
            Values::U8(v) => v.len(),
            Values::U16(v) => v.len(),
            Values::U32(v) => v.len(),
            Values::U64(v) => v.len(),
            Values::I8(v) => v.len(),
            Values::I16(v) => v.len(),
            Values::I32(v) => v.len(),
            Values::I64(v) => v.len(),
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    /// No values.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Their dtype.
    #[must_use]
    pub fn dtype(&self) -> DType {
        match self {
            Values::U8(_) => DType::U8,
            Values::U16(_) => DType::U16,
            Values::U32(_) => DType::U32,
            Values::U64(_) => DType::U64,
            Values::I8(_) => DType::I8,
            Values::I16(_) => DType::I16,
            Values::I32(_) => DType::I32,
            Values::I64(_) => DType::I64,
            Values::F32(_) => DType::F32,
            Values::F64(_) => DType::F64,
        }
    }
}

/// One logged signal, as the model declared it and with every row the log holds.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedSignal {
    /// The signal's name.
    pub name: String,
    /// Its value type.
    pub dtype: DType,
    /// Its shape (values per tick: `[channels]` or `[samples, channels]`).
    pub shape: Vec<usize>,
    /// Whether each tick carries 0..=`rows_per_tick` rows.
    pub variable: bool,
    /// Rows per tick the model declared (`shape[0]` of a 2-D shape, else 1).
    pub rows_per_tick: usize,
    /// The tick of each logged row group.
    pub tick: Vec<i64>,
    /// Rows in each row group (for a fixed signal, its rows per tick).
    pub rows: Vec<i64>,
    /// Every row's values, one row group after another: shaped [`data_shape`](Self::data_shape).
    pub data: Values,
    /// One name per value of a row (the model's `channels:`); empty if it gave none or the
    /// log predates them.
    pub channels: Vec<String>,
    /// One unit per value of a row (the model's `units:`); empty if it gave none or the log
    /// predates them.
    pub units: Vec<String>,
}

impl LoggedSignal {
    /// The shape of [`data`](Self::data): a fixed signal's is `[row groups, *shape]`; a
    /// variable signal's rows differ per tick, so it is every row one after another,
    /// `[sum(rows), *shape[1..]]`.
    #[must_use]
    pub fn data_shape(&self) -> Vec<usize> {
        if self.variable {
            let inner = self.shape.get(1..).unwrap_or_default();
            let per: usize = inner.iter().product();
            let mut s = vec![self.data.len().checked_div(per).unwrap_or(0)];
            s.extend_from_slice(inner);
            s
        } else {
            let mut s = vec![self.tick.len()];
            s.extend_from_slice(&self.shape);
            s
        }
    }
}

/// A runtime log: its ticks and every logged signal, in the order the model listed them.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeLog {
    /// The file read.
    pub path: PathBuf,
    /// The `ticks` table.
    pub ticks: LoggedTicks,
    /// The logged signals.
    pub signals: Vec<LoggedSignal>,
}

/// Read the log at `path` (written by the `logger` sink, opened read-only).
///
/// # Errors
/// [`LogReadError::NotFound`] if no file is there; [`LogReadError::NotALog`] if it is not
/// SQLite or its tables are missing or damaged, saying which.
pub fn read_log(path: &Path) -> Result<RuntimeLog, LogReadError> {
    if !path.is_file() {
        return Err(LogReadError::NotFound {
            path: path.to_owned(),
        });
    }
    let not_a_log = |why: String| LogReadError::NotALog {
        path: path.to_owned(),
        why,
    };
    let db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| not_a_log(e.to_string()))?;
    let ticks = read_ticks(&db).map_err(|e| not_a_log(format!("its ticks table: {e}")))?;
    let signals = read_signals(&db).map_err(not_a_log)?;
    Ok(RuntimeLog {
        path: path.to_owned(),
        ticks,
        signals,
    })
}

fn read_ticks(db: &Connection) -> rusqlite::Result<LoggedTicks> {
    let mut t = LoggedTicks::default();
    let mut st = db.prepare(
        "SELECT tick, deadline_ns, start_ns, monotonic_ns, realtime_ns FROM ticks ORDER BY tick",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        t.tick.push(r.get(0)?);
        t.deadline_ns.push(r.get(1)?);
        t.start_ns.push(r.get(2)?);
        t.monotonic_ns.push(r.get(3)?);
        t.realtime_ns.push(r.get(4)?);
    }
    Ok(t)
}

/// The column names of `table` (none if there is no such table).
fn columns(db: &Connection, table: &str) -> rusqlite::Result<Vec<String>> {
    let mut st = db.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let names = st.query_map([table], |r| r.get(0))?;
    names.collect()
}

/// A row of the `signals` table.
struct Meta {
    name: String,
    dtype: String,
    shape: String,
    rows_per_tick: i64,
    variable: bool,
    table: String,
    channels: Option<String>,
    units: Option<String>,
}

fn read_signals(db: &Connection) -> Result<Vec<LoggedSignal>, String> {
    let sql = |e: rusqlite::Error| format!("its signals table: {e}");
    let have = columns(db, "signals").map_err(sql)?;
    // logs written before signals had channel names and units lack those columns
    let or_null = |c: &'static str| {
        if have.iter().any(|h| h == c) {
            c
        } else {
            "NULL"
        }
    };
    let mut st = db
        .prepare(&format!(
            "SELECT name, dtype, shape, rows_per_tick, variable, table_name, {}, {} \
             FROM signals ORDER BY rowid",
            or_null("channels"),
            or_null("units")
        ))
        .map_err(sql)?;
    let metas = st
        .query_map([], |r| {
            Ok(Meta {
                name: r.get(0)?,
                dtype: r.get(1)?,
                shape: r.get(2)?,
                rows_per_tick: r.get(3)?,
                variable: r.get::<_, i64>(4)? != 0,
                table: r.get(5)?,
                channels: r.get(6)?,
                units: r.get(7)?,
            })
        })
        .map_err(sql)?
        .collect::<rusqlite::Result<Vec<Meta>>>()
        .map_err(sql)?;
    metas
        .into_iter()
        .map(|m| {
            let name = m.name.clone();
            read_signal(db, m).map_err(|e| format!("signal {name:?}: {e}"))
        })
        .collect()
}

/// A JSON list of text (`channels`, `units`); none for NULL or an empty cell.
fn names(text: Option<&str>, what: &str) -> Result<Vec<String>, String> {
    match text {
        None | Some("") => Ok(Vec::new()),
        Some(t) => {
            serde_json::from_str(t).map_err(|e| format!("its {what} {t:?} are not a list: {e}"))
        }
    }
}

fn read_signal(db: &Connection, m: Meta) -> Result<LoggedSignal, String> {
    let sql = |e: rusqlite::Error| format!("its table {:?}: {e}", m.table);
    let dtype: DType = m.dtype.parse().map_err(|e| format!("{e}"))?;
    let shape: Vec<usize> = serde_json::from_str(&m.shape)
        .map_err(|e| format!("its shape {:?} is not a list of sizes: {e}", m.shape))?;
    let rows_per_tick = usize::try_from(m.rows_per_tick)
        .map_err(|_| format!("rows_per_tick {} is negative", m.rows_per_tick))?;
    let per_tick: usize = shape.iter().product();
    let row_len: usize = if shape.len() >= 2 {
        shape[1..].iter().product()
    } else {
        per_tick
    };
    let cols = columns(db, &m.table).map_err(sql)?;
    if cols.is_empty() {
        return Err(format!("its table {:?} is missing", m.table));
    }
    let mut tick = Vec::new();
    let mut rows = Vec::new();
    let mut data = Values::new(dtype);
    if cols.iter().any(|c| c == "data") {
        // a variable signal, or a fixed one of more values than columns: a BLOB per tick
        let mut bytes = Vec::new();
        let mut st = db
            .prepare(&format!(
                "SELECT tick, rows, data FROM {} ORDER BY rowid",
                quote(&m.table)
            ))
            .map_err(sql)?;
        let mut q = st.query([]).map_err(sql)?;
        while let Some(r) = q.next().map_err(sql)? {
            tick.push(r.get::<_, i64>(0).map_err(sql)?);
            rows.push(r.get::<_, i64>(1).map_err(sql)?);
            match r.get_ref(2).map_err(sql)? {
                ValueRef::Blob(b) => bytes.extend_from_slice(b),
                ValueRef::Null => {}
                _ => {
                    return Err(format!(
                        "its table {:?} holds data that is no BLOB",
                        m.table
                    ))
                }
            }
        }
        let want_rows: i64 = rows.iter().sum();
        let want = if m.variable {
            usize::try_from(want_rows).unwrap_or(usize::MAX) * row_len
        } else {
            tick.len() * per_tick
        } * dtype.itemsize();
        if bytes.len() != want {
            return Err(format!(
                "its table {:?} holds {} bytes of data where its rows need {want}",
                m.table,
                bytes.len()
            ));
        }
        data = Values::from_ne_bytes(dtype, &bytes);
    } else {
        // a fixed signal of few values: one column per value after the tick
        if cols.len() - 1 != per_tick {
            return Err(format!(
                "its table {:?} has {} value columns where its shape {shape:?} needs {per_tick}",
                m.table,
                cols.len() - 1
            ));
        }
        let mut st = db
            .prepare(&format!("SELECT * FROM {} ORDER BY rowid", quote(&m.table)))
            .map_err(sql)?;
        let mut q = st.query([]).map_err(sql)?;
        while let Some(r) = q.next().map_err(sql)? {
            tick.push(r.get::<_, i64>(0).map_err(sql)?);
            for (k, col) in cols.iter().enumerate().skip(1) {
                if !data.push_cell(r.get_ref(k).map_err(sql)?) {
                    return Err(format!(
                        "its table {:?} holds a value that is no number (column {col})",
                        m.table
                    ));
                }
            }
        }
        rows = vec![m.rows_per_tick; tick.len()];
    }
    Ok(LoggedSignal {
        channels: names(m.channels.as_deref(), "channels")?,
        units: names(m.units.as_deref(), "units")?,
        name: m.name,
        dtype,
        shape,
        variable: m.variable,
        rows_per_tick,
        tick,
        rows,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drivers::{InView, TickInfo};
    use crate::model::Signal;
    use rtloop_testkit::TempDir;

    fn sig(name: &str, shape: Vec<usize>, dtype: DType, variable: bool) -> Signal {
        Signal {
            name: name.into(),
            shape,
            dtype,
            history: 1,
            variable,
            channels: Vec::new(),
            units: Vec::new(),
            line: 1,
        }
    }

    fn ne<T: Copy, B: AsRef<[u8]>>(values: &[T], to: impl Fn(T) -> B) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| to(*v).as_ref().to_vec())
            .collect()
    }

    /// Runs the real logger sink over `ticks` ticks of `signals`, each tick's (bytes, rows)
    /// from `data(tick, signal index)`, into `dir/log.db`.
    fn write_log(
        dir: &Path,
        signals: &[Signal],
        ticks: u64,
        data: impl Fn(u64, usize) -> (Vec<u8>, usize),
    ) -> PathBuf {
        let ctx = crate::drivers::DriverCtx {
            model: "m".into(),
            tick: std::time::Duration::from_millis(1),
            out_dir: dir.to_owned(),
            process: "log".into(),
        };
        // small batches: the log holds several transactions
        let opts = serde_json::json!({"path": "log.db", "overwrite": true, "batch_ticks": 3});
        let mut sink = super::super::open(&opts, signals, &ctx).unwrap();
        for t in 0..ticks {
            let made: Vec<(Vec<u8>, usize)> = (0..signals.len()).map(|s| data(t, s)).collect();
            let inputs: Vec<InView<'_>> = signals
                .iter()
                .zip(&made)
                .map(|(s, (bytes, rows))| InView {
                    signal: s,
                    bytes,
                    rows: *rows,
                    first: 0,
                })
                .collect();
            let info = TickInfo {
                tick: t,
                deadline_ns: 1_000 + t,
                start_ns: 2_000 + t,
                realtime_ns: 3_000 + t,
                monotonic_ns: 4_000 + t,
            };
            sink.tick(&info, &inputs).unwrap();
        }
        let summary = sink.finish().unwrap();
        assert!(
            summary.contains(&format!("logged {ticks} ticks")),
            "{summary}"
        );
        dir.join("log.db")
    }

    #[test]
    fn every_form_the_logger_writes_reads_back_as_written() {
        let dir = TempDir::new("log-read");
        let mut level = sig("level", vec![4], DType::I16, false);
        level.channels = ["Fz", "Cz", "Pz", "Oz"].map(String::from).to_vec();
        level.units = ["uV", "", "mV", "uV"].map(String::from).to_vec();
        let signals = [
            // 4 values: one INTEGER column each
            level,
            // 240 values: more than MAX_COLUMNS, a BLOB per tick
            sig("raw", vec![30, 8], DType::F32, false),
            // variable: a BLOB of the tick's rows
            sig("marks", vec![4, 2], DType::I32, true),
            // uint64 above i64::MAX in an INTEGER column
            sig("big", vec![2], DType::U64, false),
            // REAL columns
            sig("power.x", vec![3], DType::F64, false),
        ];
        let level_of = |t: u64| -> Vec<i16> { (0..4).map(|c| t as i16 * 10 - c).collect() };
        let raw_of =
            |t: u64| -> Vec<f32> { (0..240).map(|i| t as f32 + i as f32 / 256.0).collect() };
        let marks_of = |t: u64| -> Vec<i32> { vec![t as i32; (t % 3) as usize * 2] };
        let big_of = |t: u64| -> Vec<u64> { vec![u64::MAX - t, t] };
        let power_of = |t: u64| -> Vec<f64> { vec![t as f64 * 0.5, -1.25, 1e300] };
        let ticks = 7;
        let path = write_log(dir.path(), &signals, ticks, |t, s| match s {
            0 => (ne(&level_of(t), i16::to_ne_bytes), 1),
            1 => (ne(&raw_of(t), f32::to_ne_bytes), 30),
            2 => (ne(&marks_of(t), i32::to_ne_bytes), (t % 3) as usize),
            3 => (ne(&big_of(t), u64::to_ne_bytes), 1),
            _ => (ne(&power_of(t), f64::to_ne_bytes), 1),
        });
        let log = read_log(&path).unwrap();
        let all: Vec<i64> = (0..ticks as i64).collect();
        assert_eq!(log.ticks.tick, all);
        assert_eq!(
            log.ticks.deadline_ns,
            all.iter().map(|t| 1_000 + t).collect::<Vec<_>>()
        );
        assert_eq!(
            log.ticks.start_ns,
            all.iter().map(|t| 2_000 + t).collect::<Vec<_>>()
        );
        assert_eq!(
            log.ticks.realtime_ns,
            all.iter().map(|t| 3_000 + t).collect::<Vec<_>>()
        );
        assert_eq!(
            log.ticks.monotonic_ns,
            all.iter().map(|t| 4_000 + t).collect::<Vec<_>>()
        );
        let names: Vec<&str> = log.signals.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["level", "raw", "marks", "big", "power.x"]);
        let [level, raw, marks, big, power] = &log.signals[..] else {
            unreachable!()
        };

        assert_eq!(
            (level.dtype, &level.shape[..], level.variable),
            (DType::I16, &[4][..], false)
        );
        assert_eq!(level.tick, all);
        assert_eq!(level.rows, vec![1; ticks as usize]);
        assert_eq!(
            level.data,
            Values::I16((0..ticks).flat_map(level_of).collect())
        );
        assert_eq!(level.data_shape(), [7, 4]);
        assert_eq!(level.channels, ["Fz", "Cz", "Pz", "Oz"]);
        assert_eq!(level.units, ["uV", "", "mV", "uV"]);

        assert_eq!(
            (raw.dtype, raw.rows_per_tick, raw.variable),
            (DType::F32, 30, false)
        );
        assert_eq!(raw.rows, vec![30; ticks as usize]);
        assert_eq!(raw.data, Values::F32((0..ticks).flat_map(raw_of).collect()));
        assert_eq!(raw.data_shape(), [7, 30, 8]);
        assert!(raw.channels.is_empty() && raw.units.is_empty());

        assert!(marks.variable);
        assert_eq!(marks.tick, all);
        assert_eq!(
            marks.rows,
            (0..ticks as i64).map(|t| t % 3).collect::<Vec<_>>()
        );
        assert_eq!(
            marks.data,
            Values::I32((0..ticks).flat_map(marks_of).collect())
        );
        let rows: i64 = marks.rows.iter().sum();
        assert_eq!(marks.data_shape(), [rows as usize, 2]);

        assert_eq!(big.data, Values::U64((0..ticks).flat_map(big_of).collect()));
        assert_eq!(
            power.data,
            Values::F64((0..ticks).flat_map(power_of).collect())
        );
        assert_eq!(power.data.dtype(), DType::F64);
    }

    #[test]
    fn a_log_from_before_channels_and_units_reads_without_them() {
        let dir = TempDir::new("log-old");
        let path = dir.path().join("old.db");
        let db = Connection::open(&path).unwrap();
        // the tables as the logger wrote them before signals had channels and units
        db.execute_batch(
            "CREATE TABLE ticks(tick INTEGER PRIMARY KEY, deadline_ns INTEGER, start_ns INTEGER,
                                monotonic_ns INTEGER, realtime_ns INTEGER);
             CREATE TABLE signals(name TEXT PRIMARY KEY, dtype TEXT, shape TEXT,
                                  rows_per_tick INTEGER, variable INTEGER, table_name TEXT);
             CREATE TABLE sig_level(tick INTEGER, v0 INTEGER, v1 INTEGER);
             CREATE TABLE sig_ev(tick INTEGER, rows INTEGER, data BLOB);
             INSERT INTO signals VALUES ('level', 'uint8', '[2]', 1, 0, 'sig_level'),
                                        ('ev', 'float32', '[3, 1]', 3, 1, 'sig_ev');
             INSERT INTO ticks VALUES (0, 10, 11, 12, 13), (1, 20, 21, 22, 23);
             INSERT INTO sig_level VALUES (0, 7, 255), (1, 8, 0);",
        )
        .unwrap();
        let ev: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect();
        db.execute(
            "INSERT INTO sig_ev VALUES (0, 0, ?1), (1, 2, ?2)",
            rusqlite::params![Vec::<u8>::new(), ev],
        )
        .unwrap();
        drop(db);
        let log = read_log(&path).unwrap();
        assert_eq!(log.ticks.tick, [0, 1]);
        assert_eq!(log.ticks.realtime_ns, [13, 23]);
        let [level, ev] = &log.signals[..] else {
            panic!("{:?}", log.signals)
        };
        assert_eq!(level.name, "level");
        assert_eq!(level.data, Values::U8(vec![7, 255, 8, 0]));
        assert_eq!(level.rows, [1, 1]);
        assert!(level.channels.is_empty() && level.units.is_empty());
        assert_eq!((ev.name.as_str(), ev.variable), ("ev", true));
        assert_eq!(ev.rows, [0, 2]);
        assert_eq!(ev.data, Values::F32(vec![1.5, -2.0]));
        assert_eq!(ev.data_shape(), [2, 1]);
    }

    #[test]
    fn a_missing_file_and_a_file_that_is_no_log_are_told_apart() {
        let dir = TempDir::new("log-bad");
        let missing = dir.path().join("missing.db");
        let e = read_log(&missing).unwrap_err();
        assert!(matches!(e, LogReadError::NotFound { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("no runtime log at {}", missing.display())
        );
        // a directory is no log file either
        assert!(matches!(
            read_log(dir.path()),
            Err(LogReadError::NotFound { .. })
        ));

        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, b"not sqlite at all".repeat(100)).unwrap();
        let e = read_log(&junk).unwrap_err();
        assert!(matches!(e, LogReadError::NotALog { .. }), "{e:?}");
        assert!(e.to_string().contains("is not a runtime log"), "{e}");

        // SQLite, but not the logger's tables
        let other = dir.path().join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t(x);")
            .unwrap();
        let e = read_log(&other).unwrap_err().to_string();
        assert!(
            e.contains("is not a runtime log") && e.contains("ticks"),
            "{e}"
        );

        // a log whose signal table is gone names the signal
        let ctx_sig = [sig("lvl", vec![2], DType::I32, false)];
        let path = write_log(dir.path(), &ctx_sig, 2, |_, _| (vec![0u8; 8], 1));
        Connection::open(&path)
            .unwrap()
            .execute_batch("DROP TABLE sig_lvl;")
            .unwrap();
        let e = read_log(&path).unwrap_err().to_string();
        assert!(
            e.contains("signal \"lvl\": its table \"sig_lvl\" is missing"),
            "{e}"
        );
    }
}
