//! `rtloop.load`'s reading of a recording: `rtloop_record::Recording` (the one reader of the
//! format: which directory, its header, the whole samples the files hold, the events up to a
//! cut line) and the header's row mapping (`rtloop_record::row_of`), handed to Python as
//! Python values. `rtloop.recording` only maps the files with numpy.

use std::path::PathBuf;

use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use rtloop_record::{LoadError, Recording};

/// The Python exception for a recording that cannot be read: FileNotFoundError when the
/// path is no recording (nor holds one), OSError for a file that cannot be read, ValueError
/// for a damaged or foreign header or a file that is not a regular file.
fn load_err(e: &LoadError) -> PyErr {
    let msg = e.to_string();
    match e {
        LoadError::NotARecording { .. } => PyFileNotFoundError::new_err(msg),
        // (errno, text): Python picks the OSError subclass (FileNotFoundError, ...) by errno
        LoadError::Io { source, .. } => PyOSError::new_err((source.raw_os_error(), msg)),
        LoadError::Damaged { .. } | LoadError::Foreign { .. } | LoadError::NotAFile { .. } => {
            PyValueError::new_err(msg)
        }
    }
}

/// A recording opened by `rtloop_record::Recording::load` (what `rtloop.load` maps).
#[pyclass(frozen, module = "rtloop._rtloop")]
pub(crate) struct RecordingFiles {
    /// The recording's directory (`OUT/STREAM`, also when `OUT` was given).
    #[pyo3(get)]
    dir: PathBuf,
    /// `header.json` as the typed header reads it, every field present.
    #[pyo3(get)]
    header: Py<PyDict>,
    /// Whole samples in both `data.bin` and `timestamps.bin`.
    #[pyo3(get)]
    rows: u64,
    /// The events of `events.jsonl` up to a line cut by a crash.
    #[pyo3(get)]
    events: Py<PyList>,
}

#[pymethods]
impl RecordingFiles {
    /// Open `path`: `OUT/STREAM`, or `OUT` when it holds exactly one recording.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<RecordingFiles> {
        let (rec, events) = crate::exit::detach(py, || {
            let rec = Recording::load(&path)?;
            let events = rec.events()?;
            Ok::<_, LoadError>((rec, events))
        })
        .map_err(|e| load_err(&e))?;
        // through its JSON value, so the header's pairs (gaps) are lists, as in header.json
        let header = serde_json::to_value(&rec.header)
            .map_err(|e| PyValueError::new_err(format!("{}: {e}", rec.dir.display())))?;
        let header = crate::report::to_py(py, &header)?.into_bound(py);
        let events = crate::report::to_py(py, &events)?.into_bound(py);
        Ok(RecordingFiles {
            dir: rec.dir,
            header: header.cast_into::<PyDict>()?.unbind(),
            rows: rec.samples,
            events: events.cast_into::<PyList>()?.unbind(),
        })
    }
}

/// The first sample and gaps of a header mapping (`header.json`'s fields, or just these
/// two), checked.
fn first_and_gaps(header: &Bound<'_, PyAny>) -> PyResult<(u64, Vec<(u64, u64)>)> {
    let first = header
        .get_item("first_sample")
        .map_err(|_| PyValueError::new_err("the header has no \"first_sample\""))?
        .extract::<u64>()
        .map_err(|_| {
            PyValueError::new_err("the header's \"first_sample\" must be a whole number >= 0")
        })?;
    let gaps = match header.get_item("gaps") {
        Ok(g) if !g.is_none() => g,
        _ => return Ok((first, Vec::new())),
    };
    let mut out = Vec::new();
    for g in gaps.try_iter()? {
        let g = g?;
        match g.extract::<Vec<u64>>().ok().as_deref() {
            Some(&[at, lost]) => out.push((at, lost)),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "the header's \"gaps\" must be [row, lost] pairs of whole numbers >= 0, not {}",
                    g.repr()?
                )))
            }
        }
    }
    Ok((first, out))
}

/// `rtloop_record::row_of` for `header` (a mapping with `first_sample` and `gaps`).
#[pyfunction]
fn recording_row_of(header: &Bound<'_, PyAny>, sample: i64) -> PyResult<(u64, bool)> {
    let (first, gaps) = first_and_gaps(header)?;
    // a negative index lies before every recorded sample, as one below `first_sample` does
    Ok(u64::try_from(sample).map_or((0, false), |s| rtloop_record::row_of(first, &gaps, s)))
}

/// `rtloop_record::sample_of` for `header` (a mapping with `first_sample` and `gaps`).
#[pyfunction]
fn recording_sample_of(header: &Bound<'_, PyAny>, row: u64) -> PyResult<u64> {
    let (first, gaps) = first_and_gaps(header)?;
    Ok(rtloop_record::sample_of(first, &gaps, row))
}

/// The header's gaps, `(row after the gap, samples lost there)`, as the mapping reads them.
#[pyfunction]
fn recording_gaps(header: &Bound<'_, PyAny>) -> PyResult<Vec<(u64, u64)>> {
    Ok(first_and_gaps(header)?.1)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RecordingFiles>()?;
    m.add_function(wrap_pyfunction!(recording_row_of, m)?)?;
    m.add_function(wrap_pyfunction!(recording_sample_of, m)?)?;
    m.add_function(wrap_pyfunction!(recording_gaps, m)?)?;
    Ok(())
}
