//! `_rtloop.Stream`: a handle on a named stream (create / open / list / remove, description,
//! statistics) from which writers and readers are made.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rtloop_stream::{ReaderMode, Stream, StreamConfig};

use crate::convert::{liveness_to_py, parse_dtype, stats_to_py};
use crate::errors::py_err;
use crate::reader::PyReader;
use crate::writer::PyWriter;

/// A handle on an open stream.
#[pyclass(module = "rtloop._rtloop", name = "Stream", frozen)]
pub(crate) struct PyStream {
    pub(crate) stream: Stream,
}

/// Parse a reader mode name.
pub(crate) fn parse_mode(mode: &str) -> PyResult<ReaderMode> {
    mode.parse::<ReaderMode>().map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "Invalid value for the 'mode' parameter. Allowed values are 'latest' and 'lossless', but got {mode:?} instead."
        ))
    })
}

#[pymethods]
impl PyStream {
    /// Create a new stream (owner-only shared memory, fully allocated up front).
    #[staticmethod]
    #[pyo3(signature = (name, dtype, n_channels, sfreq, capacity, event_capacity, ch_names, ch_units, replace=false, ch_types=Vec::new(), content_type=String::new(), source_id=String::new(), description=String::new(), keep=false, internal=false))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        name: &str,
        dtype: &str,
        n_channels: usize,
        sfreq: f64,
        capacity: u64,
        event_capacity: u64,
        ch_names: Vec<String>,
        ch_units: Vec<String>,
        replace: bool,
        ch_types: Vec<String>,
        content_type: String,
        source_id: String,
        description: String,
        keep: bool,
        internal: bool,
    ) -> PyResult<Self> {
        let cfg = StreamConfig {
            dtype: parse_dtype(dtype)?,
            n_channels,
            nominal_rate: sfreq,
            capacity,
            event_capacity,
            ch_names,
            ch_units,
            ch_types,
            content_type,
            source_id,
            description,
            keep,
            internal,
        };
        // allocating and touching a large stream takes a while: let other threads run
        let stream = crate::exit::detach(py, || {
            if replace {
                Stream::create_replacing(name, &cfg)
            } else {
                Stream::create(name, &cfg)
            }
        })
        .map_err(py_err)?;
        Ok(PyStream { stream })
    }

    /// Open an existing stream, checking its magic and layout version.
    #[staticmethod]
    fn open(py: Python<'_>, name: &str) -> PyResult<Self> {
        let stream = crate::exit::detach(py, || Stream::open(name)).map_err(py_err)?;
        Ok(PyStream { stream })
    }

    /// Open the stream file at `path`.
    #[staticmethod]
    fn open_path(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let stream = crate::exit::detach(py, || Stream::open_path(&path)).map_err(py_err)?;
        Ok(PyStream { stream })
    }

    /// Names of the streams there are (sorted).
    #[staticmethod]
    fn list() -> Vec<String> {
        Stream::list()
    }

    /// Remove a stream's name (processes that have it open keep their mapping).
    #[staticmethod]
    fn remove(name: &str) -> PyResult<()> {
        Stream::remove(name).map_err(py_err)
    }

    /// Every stream with its state: `(name, state, detail, stream or None)`, sorted by name;
    /// with `reclaim`, ended streams nobody keeps are given back first. Returns the list and
    /// what was freed as `(name, bytes, why)`.
    #[staticmethod]
    #[allow(clippy::type_complexity)]
    fn survey(
        py: Python<'_>,
        reclaim: bool,
    ) -> (
        Vec<(String, &'static str, String, Option<PyStream>)>,
        Vec<(String, u64, String)>,
    ) {
        let (found, freed) = crate::exit::detach(py, || Stream::survey(reclaim));
        (
            found
                .into_iter()
                .map(|e| {
                    (
                        e.name,
                        e.state.word(),
                        e.state.to_string(),
                        e.stream.map(|stream| PyStream { stream }),
                    )
                })
                .collect(),
            freed
                .into_iter()
                .map(|r| (r.name, r.bytes, r.why))
                .collect(),
        )
    }

    /// Give back every ended stream nobody keeps: `(name, bytes, why)` for each.
    #[staticmethod]
    fn collect_ended(py: Python<'_>) -> Vec<(String, u64, String)> {
        crate::exit::detach(py, Stream::collect_ended)
            .into_iter()
            .map(|r| (r.name, r.bytes, r.why))
            .collect()
    }

    /// Where the stream is in its life: live, waiting, closed, dead or damaged.
    #[getter]
    fn state(&self) -> &'static str {
        rtloop_stream::StreamState::of(&self.stream).word()
    }

    /// Why the stream's shared counters cannot be right (`None` while they can).
    #[getter]
    fn damage(&self) -> Option<String> {
        self.stream.damage()
    }

    /// Where in the file the samples' `written` counter sits (for tests that damage it).
    #[getter]
    fn _samples_written_file_offset(&self) -> u64 {
        self.stream.samples_written_file_offset()
    }

    /// Whether the name outlives a clean close.
    #[getter]
    fn keep(&self) -> bool {
        self.stream.info().keep
    }

    /// Whether the stream is used inside one rtloop tool (hidden from listings).
    #[getter]
    fn internal(&self) -> bool {
        self.stream.info().internal
    }

    /// Whether the stream's name still leads to this stream.
    #[getter]
    fn is_current(&self) -> bool {
        self.stream.is_current()
    }

    /// Stream name.
    #[getter]
    fn name(&self) -> &str {
        self.stream.name()
    }

    /// Sample dtype name (numpy style).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.stream.info().dtype.name()
    }

    /// Channels per sample.
    #[getter]
    fn n_channels(&self) -> usize {
        self.stream.info().n_channels
    }

    /// Bytes per sample.
    #[getter]
    fn sample_bytes(&self) -> usize {
        self.stream.info().sample_bytes
    }

    /// Nominal sample rate in Hz (0 = irregular).
    #[getter]
    fn sfreq(&self) -> f64 {
        self.stream.info().nominal_rate
    }

    /// Samples kept.
    #[getter]
    fn capacity(&self) -> u64 {
        self.stream.info().capacity
    }

    /// Events kept.
    #[getter]
    fn event_capacity(&self) -> u64 {
        self.stream.info().event_capacity
    }

    /// Channel names.
    #[getter]
    fn ch_names(&self) -> Vec<String> {
        self.stream.info().ch_names.clone()
    }

    /// Channel units.
    #[getter]
    fn ch_units(&self) -> Vec<String> {
        self.stream.info().ch_units.clone()
    }

    /// Channel types (empty: none given).
    #[getter]
    fn ch_types(&self) -> Vec<String> {
        self.stream.info().ch_types.clone()
    }

    /// Content type (LSL's stream type; empty: none given).
    #[getter]
    fn content_type(&self) -> &str {
        &self.stream.info().content_type
    }

    /// Source id (empty: none given).
    #[getter]
    fn source_id(&self) -> &str {
        &self.stream.info().source_id
    }

    /// Free-form description as stored (the Python package keeps JSON here).
    #[getter]
    fn description(&self) -> &str {
        &self.stream.info().description
    }

    /// Pid of the process that created the stream.
    #[getter]
    fn creator_pid(&self) -> u32 {
        self.stream.info().creator_pid
    }

    /// Creation time, Unix ns.
    #[getter]
    fn created_unix_ns(&self) -> u64 {
        self.stream.info().created_unix_ns
    }

    /// Size of the shared-memory file in bytes.
    #[getter]
    fn file_bytes(&self) -> u64 {
        self.stream.info().file_bytes
    }

    /// Path of the shared-memory file.
    #[getter]
    fn path(&self) -> std::path::PathBuf {
        self.stream.info().path.clone()
    }

    /// Samples committed so far.
    #[getter]
    fn written(&self) -> u64 {
        self.stream.written()
    }

    /// Events pushed so far.
    #[getter]
    fn events_written(&self) -> u64 {
        self.stream.events_written()
    }

    /// A snapshot of the stream's counters, readers and writer state.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_to_py(py, &self.stream.stats())
    }

    /// The writer's state.
    fn writer_liveness<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        liveness_to_py(py, self.stream.writer_liveness())
    }

    /// Become the stream's one writer.
    fn writer(&self) -> PyResult<PyWriter> {
        let writer = self.stream.writer().map_err(py_err)?;
        Ok(PyWriter::new(writer))
    }

    /// Register a reader (`"latest"` or `"lossless"`), starting at the newest sample.
    fn reader(&self, mode: &str) -> PyResult<PyReader> {
        let reader = self.stream.reader(parse_mode(mode)?).map_err(py_err)?;
        Ok(PyReader::new(reader))
    }

    fn __repr__(&self) -> String {
        let i = self.stream.info();
        format!(
            "<rtloop._rtloop.Stream {:?} {} x {} ch, capacity {}>",
            i.name, i.dtype, i.n_channels, i.capacity
        )
    }
}
