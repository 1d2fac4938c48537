"""Typed stubs of rtloop's native module (checked with ``python -m mypy.stubtest rtloop._rtloop``).

Arrays are ``(n_samples, n_channels)``; timestamps float64 seconds of CLOCK_MONOTONIC.
"""

import os
import pathlib
from typing import Callable, Any, Dict, Final, List, Mapping, Optional, Sequence, Tuple, Union, final

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "__version__",
    "DTYPES",
    "DEFAULT_WRITE_TIMEOUT",
    "Stream",
    "Writer",
    "Reader",
    "WindowBase",
    "local_clock",
    "monotonic_ns",
    "stream_path",
    "lab_loadtest",
    "lab_tune",
    "runtime_module",
    "runtime_run",
    "RecordSession",
    "BridgeSession",
    "brainflow_boards",
    "ReplaySession",
    "xdf_from_recording",
    "read_log",
    "RecordingFiles",
    "recording_row_of",
    "recording_sample_of",
    "recording_gaps",
    "TickMemory",
    "FieldTripClient",
    "FieldTripServer",
    "fieldtrip_address",
    "fieldtrip_dtype_code",
    "FIELDTRIP_VERSION",
    "FIELDTRIP_COMMANDS",
    "FIELDTRIP_CHUNKS",
    "FIELDTRIP_DATATYPES",
    "_init_logging",
    "_reset_logging",
    "_prepare_numpy",
    "RtloopError",
    "StreamNotFoundError",
    "StreamExistsError",
    "NotAStreamError",
    "LayoutVersionError",
    "WriterBusyError",
    "NoReaderSlotError",
    "OverrunError",
    "WindowError",
    "TooOldError",
    "NotYetWrittenError",
    "WriteTimeoutError",
    "WriterDeadError",
    "WriterClosedError",
    "ForkedHandleError",
    "IncompleteWriteError",
    "EventError",
    "FieldTripError",
    "SosFilter",
    "Reref",
    "SpikeDetector",
    "MovingRms",
    "Decimator",
    "RippleDetector",
    "PhaseTracker",
]
__version__: Final[str]
DTYPES: Final[List[str]]
DEFAULT_WRITE_TIMEOUT: Final[float]

def _prepare_numpy() -> None: ...
def local_clock() -> float: ...
def monotonic_ns() -> int: ...
def stream_path(name: str) -> pathlib.Path: ...
def lab_loadtest(
    profile: str,
    read_size: int,
    seconds: float,
    warmup: float,
    transport: str,
    every: int,
    fps: Optional[int],
    received_words: Optional[int],
    fifo_bytes: Optional[int],
    spin_us: Optional[int],
    reference: bool,
    out: Optional[str],
    work: Callable[[NDArray[Any]], Any],
    publish: Optional[str] = None,
) -> Dict[str, Any]: ...
def lab_tune(
    profile: str,
    transport: str,
    every: int,
    fps: Optional[int],
    received_words: Optional[int],
    fifo_bytes: Optional[int],
    spin_us: Optional[int],
    config_json: str,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]: ...
def runtime_module(args: List[str]) -> int: ...
@final
class RecordSession:
    def __new__(
        cls,
        streams: List[str],
        out: Union[str, "os.PathLike[str]"],
        seconds: Optional[float] = None,
        control: Optional[Union[str, "os.PathLike[str]"]] = None,
    ) -> "RecordSession": ...
    @property
    def running(self) -> bool: ...
    def stop(self) -> List[Dict[str, Any]]: ...

@final
class RecordingFiles:
    """A recording opened by the Rust reader (``rtloop.load`` maps its files)."""
    def __new__(cls, path: Union[str, "os.PathLike[str]"]) -> "RecordingFiles": ...
    @property
    def dir(self) -> pathlib.Path: ...
    @property
    def header(self) -> Dict[str, Any]: ...
    @property
    def rows(self) -> int: ...
    @property
    def events(self) -> List[Dict[str, Any]]: ...

def recording_row_of(header: Mapping[str, Any], sample: int) -> Tuple[int, bool]: ...
def recording_sample_of(header: Mapping[str, Any], row: int) -> int: ...
def recording_gaps(header: Mapping[str, Any]) -> List[Tuple[int, int]]: ...

@final
class BridgeSession:
    @staticmethod
    def lsl_in(
        query: str,
        by: Optional[str] = None,
        stream: Optional[str] = None,
        timeout: float = 5.0,
        capacity: Optional[int] = None,
        seconds: Optional[float] = None,
        keep: bool = False,
    ) -> "BridgeSession": ...
    @staticmethod
    def lsl_out(
        stream: str,
        name: Optional[str] = None,
        kind: Optional[str] = None,
        source_id: Optional[str] = None,
        seconds: Optional[float] = None,
    ) -> "BridgeSession": ...
    @staticmethod
    def brainflow_in(
        board: str,
        params: str,
        configs: List[str],
        name: Optional[str] = None,
        capacity: Optional[int] = None,
        seconds: Optional[float] = None,
        keep: bool = False,
        stall: float = 2.0,
        retry: float = 1.0,
    ) -> "BridgeSession": ...
    @property
    def streams(self) -> List[str]: ...
    @property
    def description(self) -> str: ...
    @property
    def running(self) -> bool: ...
    def wait(self, timeout: Optional[float] = None) -> bool: ...
    def stop(self) -> Optional[Dict[str, Any]]: ...

def brainflow_boards() -> List[Tuple[str, int, List[str]]]: ...
@final
class ReplaySession:
    def __new__(
        cls,
        path: Union[str, "os.PathLike[str]"],
        series: List[str],
        all: bool,
        stream: Optional[str],
        speed: Optional[float],
        capacity: Optional[int],
        keep: bool = ...,
    ) -> "ReplaySession": ...
    @property
    def streams(self) -> List[str]: ...
    @property
    def running(self) -> bool: ...
    def wait(self, timeout: Optional[float] = None) -> bool: ...
    def stop(self) -> List[Dict[str, Any]]: ...
def xdf_from_recording(
    dir: Union[str, "os.PathLike[str]"], out: Union[str, "os.PathLike[str]"], chunk: int = 4096
) -> int: ...
# (name, dtype, shape, variable, tick, data, rows, channels, units) of one logged signal
_LoggedSignal = Tuple[
    str, str, Tuple[int, ...], bool, NDArray[np.int64], NDArray[Any], NDArray[np.int64], Tuple[str, ...], Tuple[str, ...]
]

def read_log(
    path: Union[str, "os.PathLike[str]"],
) -> Tuple[Dict[str, NDArray[np.int64]], List[_LoggedSignal]]: ...
def runtime_run(
    model: Union[str, "os.PathLike[str]"],
    seconds: Optional[float] = None,
    ticks: Optional[int] = None,
    keep: bool = False,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Tuple[int, Optional[Dict[str, Any]], str]: ...
@final
class TickMemory: ...

# (type, value, sample, offset, duration); type and value as str, bytes (char that is not
# UTF-8), a number or a numpy array
_FieldTripEvent = Tuple[Any, Any, int, int, int]

# the FieldTrip codec's numbers: version, command name -> code, chunk type name -> code,
# data type code -> (name, bytes per value)
FIELDTRIP_VERSION: Final[int]
FIELDTRIP_COMMANDS: Final[Dict[str, int]]
FIELDTRIP_CHUNKS: Final[Dict[str, int]]
FIELDTRIP_DATATYPES: Final[Dict[int, Tuple[str, int]]]

@final
class FieldTripServer:
    def __new__(
        cls,
        stream: str,
        bind: str,
        tcp: bool,
        unix: Optional[Union[str, "os.PathLike[str]"]],
        capacity: int,
        max_bytes: int,
        events: int,
        max_message: int,
        max_clients: int,
        message_timeout: float,
        memory_mb: int,
        poll: str,
        pm_qos: bool,
        keep: bool,
    ) -> "FieldTripServer": ...
    @property
    def tcp_address(self) -> Optional[Tuple[str, int]]: ...
    @property
    def unix_path(self) -> Optional[pathlib.Path]: ...
    @property
    def stream(self) -> str: ...
    @property
    def clients(self) -> int: ...
    @property
    def running(self) -> bool: ...
    def stop(self) -> None: ...

@final
class FieldTripClient:
    def __new__(
        cls, host: str, port: int, path: Optional[Union[str, "os.PathLike[str]"]] = None
    ) -> "FieldTripClient": ...
    @property
    def address(self) -> str: ...
    @property
    def connected(self) -> bool: ...
    def close(self) -> None: ...
    def put_header(
        self, n_channels: int, fsample: float, data_type: int, labels: List[str], chunks: List[Tuple[int, bytes]]
    ) -> None: ...
    def get_header(self) -> Tuple[int, int, int, float, int, List[str], List[Tuple[int, bytes]]]: ...
    def put_data(self, data: NDArray[np.uint8], n_channels: int, data_type: int, response: bool) -> None: ...
    def get_data(self, start: Optional[int] = None, end: Optional[int] = None) -> NDArray[Any]: ...
    def put_events(self, events: List[_FieldTripEvent], response: bool) -> None: ...
    def get_events(self, start: Optional[int] = None, end: Optional[int] = None) -> List[_FieldTripEvent]: ...
    def wait(self, nsamples: int, nevents: int, timeout_ms: int) -> Tuple[int, int]: ...
    def flush_header(self) -> None: ...
    def flush_data(self) -> None: ...
    def flush_events(self) -> None: ...

def fieldtrip_address(host: str, port: int) -> Tuple[str, int]: ...
def fieldtrip_dtype_code(data_type: Any) -> int: ...

def _init_logging() -> bool: ...
def _reset_logging() -> None: ...

_EventValue = Any  # str | tuple[str, bytes] (dtype name, raw values)
_EventTuple = Tuple[_EventValue, _EventValue, int, int, int, float]

@final
class Stream:
    @staticmethod
    def create(
        name: str,
        dtype: str,
        n_channels: int,
        sfreq: float,
        capacity: int,
        event_capacity: int,
        ch_names: List[str],
        ch_units: List[str],
        replace: bool = False,
        ch_types: List[str] = ...,
        content_type: str = ...,
        source_id: str = ...,
        description: str = ...,
        keep: bool = False,
        internal: bool = False,
    ) -> Stream: ...
    @staticmethod
    def open(name: str) -> Stream: ...
    @staticmethod
    def open_path(path: str | os.PathLike[str]) -> Stream: ...
    @staticmethod
    def list() -> List[str]: ...
    @staticmethod
    def remove(name: str) -> None: ...
    @staticmethod
    def survey(
        reclaim: bool,
    ) -> Tuple[List[Tuple[str, str, str, Optional[Stream]]], List[Tuple[str, int, str]]]: ...
    @staticmethod
    def collect_ended() -> List[Tuple[str, int, str]]: ...
    @property
    def state(self) -> str: ...
    @property
    def damage(self) -> Optional[str]: ...
    @property
    def _samples_written_file_offset(self) -> int: ...
    @property
    def keep(self) -> bool: ...
    @property
    def internal(self) -> bool: ...
    @property
    def is_current(self) -> bool: ...
    @property
    def name(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def n_channels(self) -> int: ...
    @property
    def sample_bytes(self) -> int: ...
    @property
    def sfreq(self) -> float: ...
    @property
    def capacity(self) -> int: ...
    @property
    def event_capacity(self) -> int: ...
    @property
    def ch_names(self) -> List[str]: ...
    @property
    def ch_units(self) -> List[str]: ...
    @property
    def ch_types(self) -> List[str]: ...
    @property
    def content_type(self) -> str: ...
    @property
    def source_id(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def creator_pid(self) -> int: ...
    @property
    def created_unix_ns(self) -> int: ...
    @property
    def file_bytes(self) -> int: ...
    @property
    def path(self) -> pathlib.Path: ...
    @property
    def written(self) -> int: ...
    @property
    def events_written(self) -> int: ...
    def stats(self) -> dict[str, Any]: ...
    def writer_liveness(self) -> dict[str, Any]: ...
    def writer(self) -> Writer: ...
    def reader(self, mode: str) -> Reader: ...

@final
class Writer:
    def write(self, data: NDArray[Any], stamp: Optional[float] = None) -> int: ...
    def reserve(self, n: int) -> NDArray[Any]: ...
    def commit(self, n: Optional[int] = None) -> int: ...
    def cancel(self) -> None: ...
    @property
    def pending(self) -> Optional[int]: ...
    def push_event(
        self, kind: Any, value: Any, sample: int, offset: int = 0, duration: int = 0
    ) -> int: ...
    def heartbeat(self) -> None: ...
    @property
    def written(self) -> int: ...
    @property
    def events_written(self) -> int: ...
    @property
    def timeout(self) -> float: ...
    @timeout.setter
    def timeout(self, value: Optional[float]) -> None: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...

@final
class Reader:
    def pull(
        self, max_samples: int, timeout: Optional[float]
    ) -> Tuple[NDArray[Any], NDArray[np.float64]]: ...
    def read(self, first: int, end: int) -> Tuple[NDArray[Any], NDArray[np.float64]]: ...
    def stamps(self, first: int, end: int) -> NDArray[np.float64]: ...
    def window(self, first: int, end: int) -> NDArray[Any]: ...
    def latest(self, n: int) -> NDArray[Any]: ...
    def wait(self, until: int, timeout: Optional[float] = None) -> int: ...
    def seek(self, sample: int) -> None: ...
    def seek_events(self, event: int) -> None: ...
    @property
    def oldest(self) -> int: ...
    @property
    def oldest_event(self) -> int: ...
    @property
    def cursor(self) -> int: ...
    @property
    def available(self) -> int: ...
    @property
    def written(self) -> int: ...
    @property
    def mode(self) -> str: ...
    @property
    def events_written(self) -> int: ...
    def writer_liveness(self) -> dict[str, Any]: ...
    def read_events(self, first: int, end: int) -> List[_EventTuple]: ...
    def pull_events(self) -> List[_EventTuple]: ...
    def set_spin(self, seconds: float) -> None: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...

@final
class WindowBase:
    @property
    def first(self) -> int: ...
    @property
    def end(self) -> int: ...
    def check(self) -> None: ...
    def valid(self) -> bool: ...

# rtloop-dsp's blocks (re-exported by rtloop.dsp): chunks are (samples, channels) float32 or
# float64 arrays; event arrays are structured arrays (fields named in each class).

@final
class SosFilter:
    def __new__(
        cls,
        channels: int,
        rate: float,
        btype: str,
        freq: Union[float, Sequence[float]],
        order: Optional[int] = None,
        q: float = 30.0,
    ) -> "SosFilter": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[Any]: ...
    def reset(self) -> None: ...
    @property
    def sections(self) -> NDArray[np.float64]: ...
    @property
    def delay_samples(self) -> float: ...
    def delay_at(self, freq: float) -> float: ...
    @property
    def channels(self) -> int: ...
    @property
    def rate(self) -> float: ...

@final
class Reref:
    def __new__(
        cls, channels: int, reference: Optional[Sequence[int]] = None, kind: str = "average"
    ) -> "Reref": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[Any]: ...
    def reset(self) -> None: ...
    @property
    def delay_samples(self) -> int: ...
    @property
    def channels(self) -> int: ...

@final
class SpikeDetector:
    def __new__(
        cls,
        channels: int,
        *,
        noise_window: int,
        peak_window: int,
        refractory: int,
        k: float = 5.0,
        sign: str = "negative",
    ) -> "SpikeDetector": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[np.void]: ...
    def reset(self) -> None: ...
    @property
    def thresholds(self) -> NDArray[np.float64]: ...
    @property
    def delay_samples(self) -> int: ...
    @property
    def channels(self) -> int: ...

@final
class MovingRms:
    def __new__(cls, channels: int, window: int) -> "MovingRms": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[Any]: ...
    def reset(self) -> None: ...
    @property
    def delay_samples(self) -> float: ...
    @property
    def channels(self) -> int: ...

@final
class Decimator:
    def __new__(cls, channels: int, factor: int) -> "Decimator": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[Any]: ...
    def reset(self) -> None: ...
    @property
    def delay_samples(self) -> float: ...
    @property
    def factor(self) -> int: ...
    @property
    def channels(self) -> int: ...

@final
class RippleDetector:
    def __new__(
        cls,
        channels: int,
        rate: float,
        *,
        band: Optional[Sequence[float]] = None,
        order: int = 3,
        rms_window: Optional[int] = None,
        z_start: float = 3.0,
        z_end: float = 1.0,
        min_duration: Optional[int] = None,
        baseline: Optional[float] = None,
        warmup: Optional[int] = None,
    ) -> "RippleDetector": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[np.void]: ...
    def reset(self) -> None: ...
    @property
    def delay_samples(self) -> float: ...
    @property
    def channels(self) -> int: ...

@final
class PhaseTracker:
    def __new__(
        cls,
        channels: int,
        rate: float,
        band: Sequence[float],
        window: int,
        *,
        target: float = 0.0,
        min_amplitude: float = 0.0,
        refractory: int = 0,
    ) -> "PhaseTracker": ...
    def process(self, chunk: NDArray[Any]) -> NDArray[np.void]: ...
    def reset(self) -> None: ...
    @property
    def latest(self) -> Tuple[NDArray[np.float64], NDArray[np.float64]]: ...
    @property
    def delay_samples(self) -> float: ...
    @property
    def channels(self) -> int: ...

class RtloopError(Exception): ...
class StreamNotFoundError(RtloopError): ...
class StreamExistsError(RtloopError): ...
class NotAStreamError(RtloopError): ...

class LayoutVersionError(RtloopError):
    found: int
    expected: int

class WriterBusyError(RtloopError):
    pid: int

class NoReaderSlotError(RtloopError): ...

class OverrunError(RtloopError):
    lost: int
    oldest: int

class WindowError(RtloopError): ...

class TooOldError(WindowError):
    oldest: int
    capacity: int

class NotYetWrittenError(WindowError):
    written: int

class WriteTimeoutError(RtloopError):
    reader_pid: int
    reader_cursor: int
    needed_end: int
    waited_ms: int

class WriterDeadError(RtloopError):
    pid: int
    written: int

class EventError(RtloopError): ...

class WriterClosedError(RtloopError):
    written: int

class ForkedHandleError(RtloopError): ...

class IncompleteWriteError(RtloopError):
    committed: int
    requested: int

class FieldTripError(RuntimeError): ...
