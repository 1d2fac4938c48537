//! `_rtloop.FieldTripClient`: the Rust FieldTrip client (`rtloop_fieldtrip::Client`) behind
//! `rtloop.fieldtrip.Client`, which turns Python arguments into the plain values taken here.
//! The protocol's numbers (commands, chunk types, data types) and the encoding of event
//! types and values are the codec's (`rtloop_fieldtrip::codec`); Python takes them from here.
//! Every call that waits on the socket releases the GIL; while a reply is awaited Python
//! handles signals every [`SLICE`], and a signal's exception (Ctrl-C) ends the call and
//! closes the connection.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use numpy::{
    PyArray1, PyArray2, PyArrayDescr, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray1,
};
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyDict, PyInt, PyString};
use rtloop_fieldtrip::client::{header_chunks, Address, ClientError};
use rtloop_fieldtrip::codec::{self, EventField};
use rtloop_fieldtrip::{Client, DataDef, WireEvent};
use rtloop_stream::{DType, ALL_DTYPES};

use crate::blocking::SLICE;
use crate::convert::{new_array, with_array_bytes, with_dtype};
use crate::errors::{py_err, ToPyErr};

/// An event as Python sees it: (type, value, sample, offset, duration), the type and value
/// as Python objects (see [`event_field`] and [`event_field_to_py`]).
type EventTuple<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, i32, i32, i32);

/// The sample types a data type may name, for error messages.
fn allowed() -> String {
    let names: Vec<&str> = ALL_DTYPES.iter().map(|d| d.name()).collect();
    format!(
        "{} (or their FieldTrip codes 1..{})",
        names.join(", "),
        codec::DATATYPE_MAX
    )
}

/// The sample type of a numpy dtype (integers and floats of a FieldTrip size, in either byte
/// order), `None` for any other.
fn sample_dtype(d: &Bound<'_, PyArrayDescr>) -> Option<DType> {
    let base = match d.kind() {
        b'f' => "float",
        b'i' => "int",
        b'u' => "uint",
        _ => return None,
    };
    format!("{base}{}", d.itemsize() * 8).parse().ok()
}

/// An event's type or value (`what`) from Python: `str` as UTF-8 text, `bytes` as text
/// byte for byte, anything else as numbers through `numpy.asarray` (bool as uint8), which
/// must be of a FieldTrip sample type.
fn event_field(v: &Bound<'_, PyAny>, what: &str) -> PyResult<EventField<'static>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(EventField::Text(Cow::Owned(
            s.to_cow()?.as_bytes().to_vec(),
        )));
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(EventField::Text(Cow::Owned(b.as_bytes().to_vec())));
    }
    if let Ok(b) = v.cast::<PyByteArray>() {
        return Ok(EventField::Text(Cow::Owned(b.to_vec())));
    }
    let np = v.py().import("numpy")?;
    let mut a = np.call_method1("asarray", (v,))?;
    if a.getattr("dtype")?.cast::<PyArrayDescr>()?.kind() == b'b' {
        a = a.call_method1("astype", (np.getattr("uint8")?,))?;
    }
    let descr = a.getattr("dtype")?;
    let Some(dtype) = sample_dtype(descr.cast::<PyArrayDescr>()?) else {
        return Err(PyTypeError::new_err(format!(
            "event {what} {} is neither text (str/bytes) nor numbers of a FieldTrip type; \
             allowed: str, bytes, int, float, or a numpy array of {}",
            v.repr()?,
            allowed()
        )));
    };
    // C order and native byte order: the bytes of `a.reshape(-1)` as the codec takes them
    let bytes = with_dtype!(dtype, T => {
        let flat = np.call_method1("ascontiguousarray", (a, numpy::dtype::<T>(v.py())))?;
        with_array_bytes::<T, _>(&flat, |b| Ok(b.to_vec()))?
    });
    Ok(EventField::Numbers {
        dtype,
        bytes: Cow::Owned(bytes),
    })
}

/// An event's type or value for Python: text as `str` (as `bytes` if it is not UTF-8, so
/// it comes back exactly as sent), one number as a Python scalar, several as a 1-D array.
fn event_field_to_py<'py>(py: Python<'py>, f: &EventField<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match f {
        EventField::Text(b) => match std::str::from_utf8(b) {
            Ok(s) => PyString::new(py, s).into_any(),
            Err(_) => PyBytes::new(py, b).into_any(),
        },
        EventField::Numbers { dtype, bytes } => with_dtype!(*dtype, T => {
            let vals: Vec<T> = bytes
                .chunks_exact(std::mem::size_of::<T>())
                .map(|c| T::from_ne_bytes(c.try_into().expect("chunks of the size of T")))
                .collect();
            match vals[..] {
                [one] => one.into_pyobject(py)?.into_any(),
                _ => PyArray1::from_vec(py, vals).into_any(),
            }
        }),
    })
}

/// One connection to a FieldTrip buffer. Calls from several threads take turns (the lock is
/// taken with the GIL released); `address` and `connected` answer at once, even during a wait.
#[pyclass(module = "rtloop._rtloop", name = "FieldTripClient", frozen)]
pub(crate) struct PyFieldTripClient {
    client: Mutex<Client>,
    addr: String,
    /// Whether the connection was open after the last call.
    // Ordering: a flag read for display, nothing published through it: Relaxed.
    open: AtomicBool,
    /// The exception of a signal Python handled while a reply was awaited.
    signal: Arc<Mutex<Option<PyErr>>>,
}

impl PyFieldTripClient {
    /// Run `f` on the client with the GIL released; a call the interrupt check ended raises
    /// the signal's exception.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Client) -> Result<T, ClientError> + Send,
    ) -> PyResult<T> {
        let result = crate::exit::detach(py, || {
            let mut client = self.client.lock().unwrap_or_else(PoisonError::into_inner);
            let r = f(&mut client);
            self.open.store(client.is_open(), Ordering::Relaxed);
            r
        });
        match result {
            Ok(v) => Ok(v),
            Err(e @ ClientError::Interrupted { .. }) => {
                let raised = self
                    .signal
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take();
                Err(raised.unwrap_or_else(|| e.to_py_err()))
            }
            Err(e) => Err(e.to_py_err()),
        }
    }
}

/// A new `(nsamples, nchans)` array of the datadef's type, kept in `slot`, and its memory as
/// the `need` bytes the client reads the samples into.
fn new_target<'b>(slot: &'b mut Option<Py<PyAny>>, def: &DataDef, need: usize) -> &'b mut [u8] {
    crate::exit::attach(|py| -> &'b mut [u8] {
        let dtype = DType::from_code(def.data_type).expect("the client checked the data type");
        let arr = new_array(py, dtype, def.nsamples as usize, def.nchans as usize);
        let ptr = with_dtype!(dtype, T => arr
            .cast::<PyArray2<T>>()
            .expect("made as T")
            .data()
            .cast::<u8>());
        *slot = Some(arr.unbind());
        if need == 0 {
            return &mut [];
        }
        // SAFETY: `ptr` is the data of a C-contiguous array made just above, of nsamples ×
        // nchans values of the datadef's type, which is `need` bytes (the client computed
        // `need` from the same datadef); any bytes are valid values of these types. The
        // array is referenced only by `slot`, which keeps it alive for 'b, and no Python
        // code sees it before the call returns it, so nothing else touches this memory
        // while the client writes into it; numpy does not move an array's data.
        unsafe { std::slice::from_raw_parts_mut(ptr, need) }
    })
}

/// `(begin, end)` of GET_DAT / GET_EVT: `None` with neither given.
fn selection(start: Option<u32>, end: Option<u32>) -> Option<(u32, u32)> {
    match (start, end) {
        (None, None) => None,
        (b, e) => Some((b.unwrap_or(0), e.unwrap_or(u32::MAX))),
    }
}

#[pymethods]
impl PyFieldTripClient {
    /// Connect to `host` (`"host"`, `"host:port"`, `"buffer://host:port"`, `"[::1]:port"`,
    /// `"unix:/path"`; `port` where it names none), or to the UNIX socket `path`.
    #[new]
    #[pyo3(signature = (host, port, path=None))]
    fn new(py: Python<'_>, host: &str, port: u16, path: Option<PathBuf>) -> PyResult<Self> {
        let addr = match path {
            Some(p) => Address::Unix(p),
            None => Address::parse(host, port).map_err(py_err)?,
        };
        let mut client = crate::exit::detach(py, || Client::connect_to(&addr)).map_err(py_err)?;
        let signal = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&signal);
        let check = move || {
            crate::exit::attach(|py| match py.check_signals() {
                Ok(()) => true,
                Err(e) => {
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(e);
                    false
                }
            })
        };
        client
            .set_interrupt(SLICE, Box::new(check))
            .map_err(|e| PyOSError::new_err((e.raw_os_error(), e.to_string())))?;
        Ok(PyFieldTripClient {
            addr: client.addr().to_owned(),
            client: Mutex::new(client),
            open: AtomicBool::new(true),
            signal,
        })
    }

    /// `"host:port"`, `"[v6]:port"` or `"unix:/path"` of the server.
    #[getter]
    fn address(&self) -> &str {
        &self.addr
    }

    /// Whether the connection is open (not closed, nor lost).
    #[getter]
    fn connected(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// Close the connection (idempotent).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |c| {
            c.close();
            Ok(())
        })
    }

    /// PUT_HDR with `labels` (empty: none) as the CHANNEL_NAMES chunk, then `chunks`.
    fn put_header(
        &self,
        py: Python<'_>,
        n_channels: u32,
        fsample: f32,
        data_type: u32,
        labels: Vec<String>,
        chunks: Vec<(u32, Bound<'_, PyBytes>)>,
    ) -> PyResult<()> {
        let pairs: Vec<(u32, &[u8])> = chunks.iter().map(|(t, b)| (*t, b.as_bytes())).collect();
        let chunks = header_chunks(n_channels, &labels, &pairs)
            .map_err(|e| ClientError::from(e).to_py_err())?;
        self.run(py, |c| {
            c.put_header(n_channels, fsample, data_type, &chunks)
        })
    }

    /// GET_HDR: `(n_channels, n_samples, n_events, fsample, data_type, labels, [(chunk
    /// type, bytes)])`, the labels from the CHANNEL_NAMES chunk (`codec::channel_labels`).
    #[allow(clippy::type_complexity)] // the header's fields, as Python unpacks them
    fn get_header<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(
        u32,
        u32,
        u32,
        f32,
        u32,
        Vec<String>,
        Vec<(u32, Bound<'py, PyBytes>)>,
    )> {
        let h = self.run(py, Client::get_header)?;
        let labels = rtloop_fieldtrip::codec::channel_labels(&h.chunks, h.def.nchans as usize);
        let chunks = rtloop_fieldtrip::codec::chunk_list(&h.chunks)
            .into_iter()
            .map(|(t, b)| (t, PyBytes::new(py, b)))
            .collect();
        let d = h.def;
        Ok((
            d.nchans,
            d.nsamples,
            d.nevents,
            d.fsample,
            d.data_type,
            labels,
            chunks,
        ))
    }

    /// PUT_DAT of `data`, the bytes of a C-contiguous `(samples, n_channels)` array of
    /// `data_type` (sent from this memory); `response=False`: PUT_DAT_NORESPONSE.
    fn put_data(
        &self,
        py: Python<'_>,
        data: PyReadonlyArray1<'_, u8>,
        n_channels: u32,
        data_type: u32,
        response: bool,
    ) -> PyResult<()> {
        let bytes = data.as_slice()?;
        self.run(py, |c| {
            c.put_data_bytes(n_channels, data_type, bytes, response)
        })
    }

    /// GET_DAT of samples `start..end` (inclusive; neither: everything kept; no `end`: to
    /// the newest) as a new `(samples, channels)` array the samples are read into.
    #[pyo3(signature = (start=None, end=None))]
    fn get_data<'py>(
        &self,
        py: Python<'py>,
        start: Option<u32>,
        end: Option<u32>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let sel = selection(start, end);
        let mut array = None;
        let slot = &mut array;
        self.run(py, move |c| {
            c.get_data_with(sel, move |def, need| new_target(slot, def, need))
        })?;
        Ok(array.expect("made once the datadef came").into_bound(py))
    }

    /// PUT_EVT of event tuples in one request, their types and values encoded by the codec;
    /// `response=False`: PUT_EVT_NORESPONSE.
    fn put_events(
        &self,
        py: Python<'_>,
        events: Vec<EventTuple<'_>>,
        response: bool,
    ) -> PyResult<()> {
        let wire = events
            .iter()
            .enumerate()
            .map(|(i, (kind, value, sample, offset, duration))| {
                WireEvent::from_fields(
                    event_field(kind, "type")?,
                    event_field(value, "value")?,
                    *sample,
                    *offset,
                    *duration,
                )
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "event {i}: its type or value is not whole values of a FieldTrip type"
                    ))
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        self.run(py, |c| {
            if response {
                c.put_events(&wire)
            } else {
                c.put_events_no_response(&wire)
            }
        })
    }

    /// GET_EVT of events `start..end` (inclusive; neither: every event kept; no `end`: to
    /// the newest) as event tuples, their types and values decoded.
    #[pyo3(signature = (start=None, end=None))]
    fn get_events<'py>(
        &self,
        py: Python<'py>,
        start: Option<u32>,
        end: Option<u32>,
    ) -> PyResult<Vec<EventTuple<'py>>> {
        let evs = self.run(py, |c| match (start, end) {
            (Some(b), None) => c.get_events_from(b),
            _ => c.get_events(selection(start, end)),
        })?;
        let field = |f: Option<EventField<'_>>| {
            // the client's codec refused events of unknown types or partial values
            let f = f.ok_or_else(|| PyRuntimeError::new_err("an event the codec did not check"))?;
            event_field_to_py(py, &f)
        };
        evs.iter()
            .map(|e| {
                Ok((
                    field(e.type_field())?,
                    field(e.value_field())?,
                    e.sample,
                    e.offset,
                    e.duration,
                ))
            })
            .collect()
    }

    /// WAIT_DAT: `(samples, events)` once samples > `nsamples` or events > `nevents`, or
    /// after `timeout_ms`.
    fn wait(
        &self,
        py: Python<'_>,
        nsamples: u32,
        nevents: u32,
        timeout_ms: u32,
    ) -> PyResult<(u32, u32)> {
        self.run(py, |c| c.wait(nsamples, nevents, timeout_ms))
    }

    /// FLUSH_HDR.
    fn flush_header(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Client::flush_header)
    }

    /// FLUSH_DAT.
    fn flush_data(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Client::flush_data)
    }

    /// FLUSH_EVT.
    fn flush_events(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, Client::flush_events)
    }
}

/// `(host, port)` of a TCP address (`"host"`, `"host:port"`, `"buffer://host:port"`,
/// `"tcp://host:port"`, `"[::1]:port"`; `port` where it names none).
#[pyfunction]
pub(crate) fn fieldtrip_address(host: &str, port: u16) -> PyResult<(String, u16)> {
    match Address::parse(host, port).map_err(py_err)? {
        Address::Tcp { host, port } => Ok((host, port)),
        Address::Unix(p) => Err(PyValueError::new_err(format!(
            "{host:?} is the UNIX socket {}, not a host and port",
            p.display()
        ))),
    }
}

/// The FieldTrip type code of `data_type`: a code of a sample type (1..=10), or anything
/// `numpy.dtype` takes that names a sample type (in either byte order).
#[pyfunction]
pub(crate) fn fieldtrip_dtype_code(data_type: &Bound<'_, PyAny>) -> PyResult<u32> {
    let np = data_type.py().import("numpy")?;
    let is_int = !data_type.is_instance_of::<PyBool>()
        && (data_type.is_instance_of::<PyInt>()
            || data_type.is_instance(&np.getattr("integer")?)?);
    if is_int {
        return data_type
            .extract::<u32>()
            .ok()
            .filter(|c| DType::from_code(*c).is_some())
            .ok_or_else(|| {
                let code = data_type
                    .str()
                    .map_or_else(|_| "?".into(), |s| s.to_string());
                PyValueError::new_err(format!(
                    "data type code {code} is not a FieldTrip sample type; allowed: {}",
                    allowed()
                ))
            });
    }
    let dt = match np.getattr("dtype")?.call1((data_type,)) {
        Ok(dt) => dt,
        Err(e) if e.is_instance_of::<PyTypeError>(data_type.py()) => {
            let err = PyTypeError::new_err(format!(
                "data type {} is not a numpy dtype; allowed: {}",
                data_type.repr()?,
                allowed()
            ));
            err.set_cause(data_type.py(), Some(e));
            return Err(err);
        }
        Err(e) => return Err(e),
    };
    match sample_dtype(dt.cast::<PyArrayDescr>()?) {
        Some(d) => Ok(d.code()),
        None => Err(PyValueError::new_err(format!(
            "data type {} is not a FieldTrip sample type; allowed: {}",
            dt.str()?,
            allowed()
        ))),
    }
}

/// The codec's numbers as module attributes: `FIELDTRIP_VERSION`, `FIELDTRIP_COMMANDS`
/// (name -> code), `FIELDTRIP_CHUNKS` (chunk type name -> code) and `FIELDTRIP_DATATYPES`
/// (code -> (name, bytes per value)).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FIELDTRIP_VERSION", codec::VERSION)?;
    let commands = PyDict::new(py);
    for c in codec::cmd::ALL {
        commands.set_item(codec::cmd::name(c), c)?;
    }
    m.add("FIELDTRIP_COMMANDS", commands)?;
    let chunks = PyDict::new(py);
    for (name, code) in codec::chunk::ALL {
        chunks.set_item(name, code)?;
    }
    m.add("FIELDTRIP_CHUNKS", chunks)?;
    let datatypes = PyDict::new(py);
    for code in 0..=codec::DATATYPE_MAX {
        let name = codec::datatype_name(code).expect("codes 0..=DATATYPE_MAX are named");
        let size = codec::wordsize(code).expect("codes 0..=DATATYPE_MAX have a size");
        datatypes.set_item(code, (name, size))?;
    }
    m.add("FIELDTRIP_DATATYPES", datatypes)?;
    m.add_function(wrap_pyfunction!(fieldtrip_dtype_code, m)?)?;
    Ok(())
}

/// A FieldTrip buffer server on a stream (`rtloop serve`'s `rtloop_fieldtrip::Server`), in
/// this process: it listens on its own threads, none of which needs the GIL (they take it
/// only to log). Frozen: `clients` answers from any thread while `stop` waits.
#[pyclass(module = "rtloop._rtloop", name = "FieldTripServer", frozen)]
pub(crate) struct PyFieldTripServer {
    server: rtloop_fieldtrip::Server,
    buffer: Arc<rtloop_fieldtrip::Buffer>,
    stream: String,
}

/// The library's limit `e`, said with this class's keyword names (`rtloop_fieldtrip`'s
/// names are the same but for the budget, which Python gives in MiB).
fn config_error(e: &rtloop_fieldtrip::ConfigError) -> PyErr {
    match e.setting() {
        "tcp" => PyValueError::new_err(format!("tcp=False needs unix=PATH: {e}")),
        "memory_budget" => PyValueError::new_err(format!("memory_mb: {e}")),
        _ => PyValueError::new_err(e.to_string()),
    }
}

#[pymethods]
impl PyFieldTripServer {
    /// Start serving: TCP on `bind` (`HOST:PORT`; port 0 picks a free one) unless `tcp` is
    /// False, and/or a UNIX socket at `unix`. The buffer's settings are `rtloop serve`'s.
    #[new]
    #[pyo3(signature = (stream, bind, tcp, unix, capacity, max_bytes, events, max_message, max_clients, message_timeout, memory_mb, poll, pm_qos, keep))]
    #[allow(clippy::too_many_arguments)] // `rtloop serve`'s options, each a keyword in Python
    fn new(
        py: Python<'_>,
        stream: String,
        bind: String,
        tcp: bool,
        unix: Option<PathBuf>,
        capacity: u64,
        max_bytes: u64,
        events: u64,
        max_message: u64,
        max_clients: u64,
        message_timeout: f64,
        memory_mb: u64,
        poll: &str,
        pm_qos: bool,
        keep: bool,
    ) -> PyResult<Self> {
        use rtloop_fieldtrip::polling::Polling;
        rtloop_stream::validate_name(&stream)
            .map_err(|e| PyValueError::new_err(format!("stream={stream:?}: {e}")))?;
        let polling: Polling = poll
            .parse()
            .map_err(|e| PyValueError::new_err(format!("poll={poll:?}: {e}")))?;
        let mut bcfg = rtloop_fieldtrip::BufferConfig::new(&stream);
        bcfg.capacity = capacity;
        bcfg.max_bytes = max_bytes;
        bcfg.events = events;
        bcfg.remove_on_drop = !keep;
        let scfg = rtloop_fieldtrip::ServerConfig {
            tcp: tcp.then_some(bind),
            unix,
            max_message: usize::try_from(max_message).unwrap_or(usize::MAX),
            max_clients: usize::try_from(max_clients).unwrap_or(usize::MAX),
            message_timeout: crate::blocking::seconds_from_py("message_timeout", message_timeout)?,
            memory_budget: usize::try_from(memory_mb)
                .unwrap_or(usize::MAX)
                .saturating_mul(1 << 20),
            polling: match polling {
                Polling::Adaptive { .. } => Polling::Adaptive { pm_qos },
                p => p,
            },
        };
        // the library's limits: checked there, once for every front end
        bcfg.validate()
            .and_then(|()| scfg.validate())
            .map_err(|e| config_error(&e))?;
        let buffer = Arc::new(rtloop_fieldtrip::Buffer::new(bcfg));
        let b = buffer.clone();
        let server = crate::exit::detach(py, move || rtloop_fieldtrip::Server::start(b, scfg))
            .map_err(|e| PyOSError::new_err(format!("the FieldTrip server cannot listen: {e}")))?;
        Ok(PyFieldTripServer {
            server,
            buffer,
            stream,
        })
    }

    /// `(host, port)` of the TCP listener (None without TCP, or once stopped).
    #[getter]
    fn tcp_address(&self) -> Option<(String, u16)> {
        if self.server.is_closed() {
            return None;
        }
        let a = self.server.tcp_addr()?;
        Some((a.ip().to_string(), a.port()))
    }

    /// The UNIX socket's path (None without one, or once stopped).
    #[getter]
    fn unix_path(&self) -> Option<PathBuf> {
        if self.server.is_closed() {
            return None;
        }
        Some(self.server.unix_path()?.to_owned())
    }

    /// The stream the buffer writes.
    #[getter]
    fn stream(&self) -> String {
        self.stream.clone()
    }

    /// Clients connected now (during and after `stop()` too).
    #[getter]
    fn clients(&self) -> usize {
        self.server.clients()
    }

    /// True until `stop()`.
    #[getter]
    fn running(&self) -> bool {
        !self.server.is_closed()
    }

    /// Stop listening, close the clients' connections (a WAIT_DAT in progress ends) and wait
    /// for their threads, then close the buffer (its stream is removed unless `keep`). A
    /// second call does nothing more.
    fn stop(&self, py: Python<'_>) {
        crate::exit::detach(py, || self.close());
    }
}

impl PyFieldTripServer {
    fn close(&self) {
        self.server.close();
        self.buffer.close();
    }
}

impl Drop for PyFieldTripServer {
    fn drop(&mut self) {
        // the connection threads may need the GIL to log before they end
        Python::attach(|py| crate::exit::detach(py, || self.close()));
    }
}
