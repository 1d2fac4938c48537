//! NWB (HDF5): read with pynwb, played by the same loop as every other format.
//!
//! rtloop does not link an HDF5 library. The Python package's `rtloop._nwb_plan` module runs
//! in the Python that runs rtloop (`$RTLOOP_PYTHON`, set by the `rtloop` console script; else
//! `python3`) and says, for the picked series, where its samples are: at a byte offset of the
//! NWB file itself when the dataset is contiguous and uncompressed, which replay maps
//! directly (as fast as any flat file), or in a flat copy it writes block by block to a
//! private temporary directory (a chunked or compressed dataset: the copy costs one pass
//! over the data before the replay starts). Names come from the electrodes table
//! (`channel_name`, else the electrode id), gains from `conversion × channel_conversion`
//! (× 1e6 to µV for volts) and `offset`, events from the interval tables (trials,
//! epochs, ...), annotation series and events tables, at the row nearest their time.

use std::path::{Path, PathBuf};
use std::process::Command;

use rtloop_stream::{DType, EventValue, StreamConfig};
use serde::Deserialize;

use crate::replay::{
    invalid, map_file, pick_series, FlatSource, Pacing, SourceError, SourceEvent, SourceInfo,
};

/// The module of the Python package that reads the file with pynwb.
pub const PLAN_MODULE: &str = "rtloop._nwb_plan";

#[derive(Debug, Deserialize)]
struct PlanEvent {
    row: u64,
    #[serde(rename = "type")]
    kind: String,
    value: String,
    duration: u64,
}

#[derive(Debug, Deserialize)]
struct Plan {
    series: String,
    file: PathBuf,
    offset: usize,
    dtype: String,
    rows: u64,
    n_channels: usize,
    rate: f64,
    stamps: Option<PathBuf>,
    ch_names: Vec<String>,
    ch_units: Vec<String>,
    gains: Vec<f64>,
    offsets: Vec<f64>,
    neurodata_type: String,
    events: Vec<PlanEvent>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    series: Vec<String>,
    plan: Option<Plan>,
}

#[derive(Debug, Deserialize)]
struct Failure {
    error: String,
}

/// The Python that reads NWB files.
fn python() -> String {
    rtloop_sys::python().to_string_lossy().into_owned()
}

/// Open series `series` of NWB file `path` (by name, or the end of its path: `LFP` for
/// `processing/ecephys/LFP`); without it the file must hold one.
///
/// # Errors
/// pynwb missing or failing on the file (its message), several series and none picked, an
/// unknown series, or a dtype a stream cannot hold.
pub fn open(path: &Path, series: Option<&str>) -> Result<FlatSource, SourceError> {
    let tmp = std::env::temp_dir().join(format!(
        "rtloop-nwb-{}-{}",
        std::process::id(),
        rtloop_sys::monotonic_ns()
    ));
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(crate::replay::io_error(&tmp))?;
    }
    let r = open_in(path, series, &tmp);
    // the copies (if any) are mapped by now: their names can go
    let _ = std::fs::remove_dir_all(&tmp);
    r
}

fn open_in(path: &Path, series: Option<&str>, tmp: &Path) -> Result<FlatSource, SourceError> {
    let py = python();
    let out = Command::new(&py)
        .args(["-m", PLAN_MODULE])
        .arg(path)
        .arg(series.unwrap_or(""))
        .arg(tmp)
        .output()
        .map_err(|e| {
            invalid(
                path,
                format!(
                    "NWB files are read with pynwb, and {py} (from $RTLOOP_PYTHON, else python3) could not be run: {e}; run rtloop from its Python package, or set RTLOOP_PYTHON to a Python with pynwb"
                ),
            )
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or("");
    if let Ok(f) = serde_json::from_str::<Failure>(last) {
        return Err(invalid(path, f.error));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let answer: Answer = match serde_json::from_str(last) {
        Ok(a) if out.status.success() => a,
        _ => {
            let why = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no output");
            let hint = if why.contains("No module named 'rtloop'")
                || why.contains("No module named rtloop")
            {
                " (NWB is read by rtloop's Python package: run rtloop from it, whose console \
                 script sets RTLOOP_PYTHON, or set RTLOOP_PYTHON to a Python where rtloop is \
                 installed with pynwb)"
            } else if why.contains("ModuleNotFoundError") {
                " (NWB is read with pynwb and numpy: run rtloop from its Python package, whose \
                 console script sets RTLOOP_PYTHON, or set RTLOOP_PYTHON to a Python that has them)"
            } else {
                ""
            };
            return Err(invalid(
                path,
                format!("pynwb (in {py}) could not read it as NWB: {why}{hint}"),
            ));
        }
    };
    pick_series(path, &answer.series, series)?;
    let Some(p) = answer.plan else {
        return Err(SourceError::UnknownSeries {
            path: path.to_owned(),
            wanted: series.unwrap_or("").to_owned(),
            series: answer.series,
        });
    };
    let dtype: DType = p
        .dtype
        .parse()
        .map_err(|e: rtloop_stream::UnknownDType| invalid(path, e.to_string()))?;
    let map = map_file(&p.file)?;
    let pacing = match &p.stamps {
        Some(s) => Pacing::Stamps(map_file(s)?),
        None => Pacing::Rate,
    };
    let events = p
        .events
        .into_iter()
        .map(|e| SourceEvent {
            row: e.row,
            kind: EventValue::Text(e.kind),
            value: EventValue::Text(e.value),
            duration: e.duration,
            offset: 0,
        })
        .collect();
    let info = SourceInfo {
        format: "nwb".into(),
        path: path.to_owned(),
        series: p.series,
        stream: StreamConfig {
            ch_names: p.ch_names,
            ch_units: p.ch_units,
            content_type: p.neurodata_type,
            ..StreamConfig::new(dtype, p.n_channels, p.rate, 0)
        },
        gains: p.gains,
        offsets: p.offsets,
    };
    FlatSource::new(info, map, p.offset, p.rows, pacing, events)
}
