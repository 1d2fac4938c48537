//! The one place where rtloop's Rust errors become Python exceptions.
//!
//! Every rtloop-specific exception derives from `rtloop.RtloopError`; bad arguments are
//! Python's own `ValueError` / `TypeError`, OS failures `OSError`, a wait that ran out of time
//! `TimeoutError`. Exceptions that carry a number (samples lost, a pid, ...) expose it as an
//! attribute as well as in the message. The `impl From<…> for PyErr` the orphan rule forbids
//! is replaced by the local [`ToPyErr`] trait.

use pyo3::create_exception;
use pyo3::exceptions::{
    PyConnectionError, PyException, PyFileNotFoundError, PyOSError, PyPermissionError,
    PyRuntimeError, PyTimeoutError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use rtloop_fieldtrip::client::{AddressError, ArgumentError, ClientError};
use rtloop_stream::{
    ClaimError, CreateError, OpenError, ReadError, RemoveError, WaitError, WriteError,
};

create_exception!(
    _rtloop,
    RtloopError,
    PyException,
    "Base class of every rtloop-specific error."
);
create_exception!(
    _rtloop,
    StreamNotFoundError,
    RtloopError,
    "No stream of that name exists (``rtloop stream list`` shows the streams there are)."
);
create_exception!(
    _rtloop,
    StreamExistsError,
    RtloopError,
    "A stream of that name already exists; remove it first."
);
create_exception!(
    _rtloop,
    NotAStreamError,
    RtloopError,
    "The shared-memory file is not an rtloop stream (wrong magic, size or header)."
);
create_exception!(
    _rtloop,
    LayoutVersionError,
    RtloopError,
    "The stream was made by an rtloop with another layout version.\n\nAttributes: ``found``, ``expected`` (layout versions)."
);
create_exception!(
    _rtloop,
    WriterBusyError,
    RtloopError,
    "The stream already has a live writer (a stream has exactly one).\n\nAttributes: ``pid`` of the process that holds it."
);
create_exception!(
    _rtloop,
    NoReaderSlotError,
    RtloopError,
    "Every reader slot of the stream is taken by a live reader."
);
create_exception!(
    _rtloop,
    OverrunError,
    RtloopError,
    "The reader was lapped: samples were overwritten before they were read.\n\nAttributes: ``lost`` (samples lost) and ``oldest`` (the oldest sample still kept). A reader continues from ``oldest`` on its next pull."
);
create_exception!(
    _rtloop,
    WindowError,
    RtloopError,
    "A window of samples that cannot be read: it begins before the oldest kept sample or reaches beyond what was written."
);
create_exception!(
    _rtloop,
    TooOldError,
    WindowError,
    "The window begins before the oldest sample the stream still keeps.\n\nAttributes: ``oldest``, ``capacity``."
);
create_exception!(
    _rtloop,
    NotYetWrittenError,
    WindowError,
    "The window reaches beyond the samples written so far.\n\nAttributes: ``written``."
);
create_exception!(
    _rtloop,
    WriteTimeoutError,
    RtloopError,
    "A lossless reader did not make room in time, so the writer gave up (lossless readers hold the writer back by design).\n\nAttributes: ``reader_pid``, ``reader_cursor``, ``needed_end``, ``waited_ms``."
);
create_exception!(
    _rtloop,
    WriterDeadError,
    RtloopError,
    "The stream's writer process died without closing the stream.\n\nAttributes: ``pid``, ``written`` (samples written before it died)."
);
create_exception!(
    _rtloop,
    WriterClosedError,
    RtloopError,
    "The stream's writer closed cleanly and every sample it wrote has been read: nothing more will come.\n\nAttributes: ``written`` (samples the stream holds)."
);
create_exception!(
    _rtloop,
    ForkedHandleError,
    RtloopError,
    "A writer or reader made by the parent process was used in a child made by ``os.fork()``. Handles belong to the process that made them: open the stream again in the child."
);
create_exception!(
    _rtloop,
    IncompleteWriteError,
    RtloopError,
    "A write longer than the stream's capacity went in pieces and a later piece failed: ``committed`` of the ``requested`` samples are in the stream. The reason is the exception's ``__cause__``."
);
create_exception!(
    _rtloop,
    EventError,
    RtloopError,
    "An event slot in the stream does not decode (damaged or foreign data)."
);

// named where Python users import it from (`rtloop.fieldtrip`), as before it was native
create_exception!(
    rtloop.fieldtrip,
    FieldTripError,
    PyRuntimeError,
    "The server refused a request (it answered PUT_ERR, GET_ERR, FLUSH_ERR or WAIT_ERR).\n\nThe message names the request, the reply and, where the client can tell, why (for example which samples the buffer holds). The connection stays usable."
);

/// Register the exception classes in the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("RtloopError", py.get_type::<RtloopError>())?;
    m.add("StreamNotFoundError", py.get_type::<StreamNotFoundError>())?;
    m.add("StreamExistsError", py.get_type::<StreamExistsError>())?;
    m.add("NotAStreamError", py.get_type::<NotAStreamError>())?;
    m.add("LayoutVersionError", py.get_type::<LayoutVersionError>())?;
    m.add("WriterBusyError", py.get_type::<WriterBusyError>())?;
    m.add("NoReaderSlotError", py.get_type::<NoReaderSlotError>())?;
    m.add("OverrunError", py.get_type::<OverrunError>())?;
    m.add("WindowError", py.get_type::<WindowError>())?;
    m.add("TooOldError", py.get_type::<TooOldError>())?;
    m.add("NotYetWrittenError", py.get_type::<NotYetWrittenError>())?;
    m.add("WriteTimeoutError", py.get_type::<WriteTimeoutError>())?;
    m.add("WriterDeadError", py.get_type::<WriterDeadError>())?;
    m.add("EventError", py.get_type::<EventError>())?;
    m.add("WriterClosedError", py.get_type::<WriterClosedError>())?;
    m.add("ForkedHandleError", py.get_type::<ForkedHandleError>())?;
    m.add(
        "IncompleteWriteError",
        py.get_type::<IncompleteWriteError>(),
    )?;
    m.add("FieldTripError", py.get_type::<FieldTripError>())?;
    Ok(())
}

/// Conversion of an rtloop error into the Python exception that stands for it.
pub(crate) trait ToPyErr {
    /// The exception, with the error's numbers as attributes where it has some.
    fn to_py_err(&self) -> PyErr;
}

/// `err` with `attrs` set on its exception value.
fn with_attrs(err: PyErr, attrs: &[(&str, u64)]) -> PyErr {
    Python::attach(|py| {
        let value = err.value(py);
        for (k, v) in attrs {
            if let Err(e) = value.setattr(*k, *v) {
                return e;
            }
        }
        err
    })
}

impl ToPyErr for CreateError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            // Python names in a Python error (the Rust message names Stream::remove)
            CreateError::InUse { pid, .. } | CreateError::NotYetWritten { pid, .. } => {
                with_attrs(StreamExistsError::new_err(msg), &[("pid", u64::from(*pid))])
            }
            CreateError::AlreadyExists { name } => StreamExistsError::new_err(format!(
                "a stream named {name:?} already exists (remove it first with rtloop.Stream.remove({name:?}) or `rtloop stream remove {name}`)"
            )),
            CreateError::Io { source, .. } => PyOSError::new_err((source.raw_os_error(), msg)),
            CreateError::Name(_)
            | CreateError::ZeroCapacity
            | CreateError::ZeroChannels
            | CreateError::TooManyChannels { .. }
            | CreateError::ZeroEventCapacity
            | CreateError::InvalidRate(_)
            | CreateError::TooLarge { .. }
            | CreateError::Labels(_) => PyValueError::new_err(msg),
        }
    }
}

impl ToPyErr for OpenError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            OpenError::Name(_) => PyValueError::new_err(msg),
            OpenError::NotFound { .. } => StreamNotFoundError::new_err(msg),
            OpenError::NotAStream { .. } => NotAStreamError::new_err(msg),
            OpenError::Refused { .. } => PyPermissionError::new_err(msg),
            OpenError::LayoutVersion {
                found, expected, ..
            } => with_attrs(
                LayoutVersionError::new_err(msg),
                &[
                    ("found", u64::from(*found)),
                    ("expected", u64::from(*expected)),
                ],
            ),
            OpenError::Io { source, .. } => PyOSError::new_err((source.raw_os_error(), msg)),
        }
    }
}

impl ToPyErr for RemoveError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            RemoveError::Name(_) => PyValueError::new_err(msg),
            RemoveError::NotFound { .. } => StreamNotFoundError::new_err(msg),
            RemoveError::NotAStream { .. } => NotAStreamError::new_err(msg),
            RemoveError::Io { source, .. } => PyOSError::new_err((source.raw_os_error(), msg)),
        }
    }
}

impl ToPyErr for ClaimError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            ClaimError::WriterBusy { pid, .. } => {
                with_attrs(WriterBusyError::new_err(msg), &[("pid", u64::from(*pid))])
            }
            ClaimError::NoReaderSlot { .. } => NoReaderSlotError::new_err(msg),
            ClaimError::Ended { .. } => StreamNotFoundError::new_err(msg),
        }
    }
}

impl ToPyErr for WriteError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            WriteError::DTypeMismatch { .. } => PyTypeError::new_err(msg),
            WriteError::ChannelMismatch { .. }
            | WriteError::TooLarge { .. }
            | WriteError::CommitTooLarge { .. }
            | WriteError::EventTooLarge { .. } => PyValueError::new_err(msg),
            WriteError::Timeout {
                reader_pid,
                reader_cursor,
                needed_end,
                waited_ms,
            } => with_attrs(
                WriteTimeoutError::new_err(msg),
                &[
                    ("reader_pid", u64::from(*reader_pid)),
                    ("reader_cursor", *reader_cursor),
                    ("needed_end", *needed_end),
                    ("waited_ms", *waited_ms),
                ],
            ),
            WriteError::ForkedCopy { .. } => ForkedHandleError::new_err(msg),
            WriteError::Incomplete {
                committed,
                requested,
                source,
            } => {
                let err = with_attrs(
                    IncompleteWriteError::new_err(msg),
                    &[("committed", *committed), ("requested", *requested)],
                );
                Python::attach(|py| err.set_cause(py, Some(source.to_py_err())));
                err
            }
        }
    }
}

impl ToPyErr for ReadError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            ReadError::Overrun { lost, oldest } => with_attrs(
                OverrunError::new_err(msg),
                &[("lost", *lost), ("oldest", *oldest)],
            ),
            ReadError::NotYetWritten { written, .. } => {
                with_attrs(NotYetWrittenError::new_err(msg), &[("written", *written)])
            }
            ReadError::TooOld {
                oldest, capacity, ..
            } => with_attrs(
                TooOldError::new_err(msg),
                &[("oldest", *oldest), ("capacity", *capacity)],
            ),
            ReadError::SeekBeyondWritten { written, .. } => {
                with_attrs(NotYetWrittenError::new_err(msg), &[("written", *written)])
            }
            ReadError::Reversed { .. }
            | ReadError::BufferSize { .. }
            | ReadError::MoreThanCapacity { .. } => PyValueError::new_err(msg),
            ReadError::DTypeMismatch { .. } => PyTypeError::new_err(msg),
            ReadError::BadEvent { .. } => EventError::new_err(msg),
            ReadError::ForkedCopy { .. } => ForkedHandleError::new_err(msg),
        }
    }
}

impl ToPyErr for WaitError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            WaitError::Timeout { .. } => PyTimeoutError::new_err(msg),
            WaitError::WriterDead { pid, written } => with_attrs(
                WriterDeadError::new_err(msg),
                &[("pid", u64::from(*pid)), ("written", *written)],
            ),
            WaitError::WriterClosed { written } => {
                with_attrs(WriterClosedError::new_err(msg), &[("written", *written)])
            }
            WaitError::ForkedCopy { .. } => ForkedHandleError::new_err(msg),
        }
    }
}

impl ToPyErr for AddressError {
    fn to_py_err(&self) -> PyErr {
        PyValueError::new_err(self.to_string())
    }
}

impl ToPyErr for ClientError {
    fn to_py_err(&self) -> PyErr {
        let msg = self.to_string();
        match self {
            ClientError::Address(_) => PyValueError::new_err(msg),
            // the numpy call that converts them
            ClientError::Argument(ArgumentError::Type { header, .. }) => {
                let name = rtloop_stream::DType::from_code(*header).map_or("", |d| d.name());
                PyValueError::new_err(format!("{msg} (data.astype(np.{name}))"))
            }
            ClientError::Argument(_) => PyValueError::new_err(msg),
            ClientError::Refused { .. } => FieldTripError::new_err(msg),
            // `from` the OS error, as socket.connect raises it (ConnectionRefusedError, ...)
            ClientError::Connect { source, .. } => {
                let err = PyConnectionError::new_err(msg);
                if let Some(code) = source.raw_os_error() {
                    // OSError(errno, strerror) is made as its subclass for the errno
                    let text = source.to_string();
                    let suffix = format!(" (os error {code})");
                    let strerror = text.strip_suffix(&suffix).unwrap_or(&text);
                    let cause = PyOSError::new_err((code, strerror.to_owned()));
                    Python::attach(|py| err.set_cause(py, Some(cause)));
                }
                err
            }
            ClientError::Io { .. }
            | ClientError::Protocol { .. }
            | ClientError::Interrupted { .. }
            | ClientError::Closed { .. } => PyConnectionError::new_err(msg),
        }
    }
}

impl ToPyErr for rtloop_stream::Error {
    fn to_py_err(&self) -> PyErr {
        use rtloop_stream::Error;
        match self {
            Error::Name(e) => PyValueError::new_err(e.to_string()),
            Error::Create(e) => e.to_py_err(),
            Error::Open(e) => e.to_py_err(),
            Error::Remove(e) => e.to_py_err(),
            Error::Claim(e) => e.to_py_err(),
            Error::Write(e) => e.to_py_err(),
            Error::Read(e) => e.to_py_err(),
            Error::Wait(e) => e.to_py_err(),
        }
    }
}

impl ToPyErr for rtloop_runtime::drivers::logger::read::LogReadError {
    fn to_py_err(&self) -> PyErr {
        use rtloop_runtime::drivers::logger::read::LogReadError;
        let msg = self.to_string();
        match self {
            LogReadError::NotFound { .. } => PyFileNotFoundError::new_err(msg),
            LogReadError::NotALog { .. } => PyValueError::new_err(msg),
        }
    }
}

/// A stream error inside a library's error (a bridge's, a replay's): the stream's own
/// exception class, so `StreamExistsError` stays catchable, with the whole `message`; the
/// stream's exception, with its attributes, is the `__cause__`.
pub(crate) fn stream_exception(message: String, source: &rtloop_stream::Error) -> PyErr {
    let inner = source.to_py_err();
    Python::attach(|py| {
        let err = PyErr::from_type(inner.get_type(py), message);
        err.set_cause(py, Some(inner));
        err
    })
}

/// `result` with its error converted (`.map_err(py_err)` at call sites).
pub(crate) fn py_err<E: ToPyErr>(e: E) -> PyErr {
    e.to_py_err()
}
