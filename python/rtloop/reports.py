"""The reports rtloop's libraries return, as typed objects.

A report is what the Rust library made (the same value the command line prints with
``--json``), read into a class whose fields are declared here: ``report.host.latency.p99_ns``
reads a field as an attribute, and a report is still the ``dict`` it was (``report["host"]``,
``json.dumps(report)``), so code written against the dictionaries keeps working.

Each class mirrors one Rust type; `Report.check` (run by the tests on real reports) fails if
the two ever name different fields.
"""

from __future__ import annotations

import sys
import typing
from typing import Any, Dict, List, Optional, Tuple, Type, TypeVar

R = TypeVar("R", bound="Report")


class Report(Dict[str, Any]):
    """A report: a ``dict`` whose keys are also attributes, nested reports typed in turn."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            fields = ", ".join(_fields(type(self)))
            raise AttributeError(f"{type(self).__name__} has no field {name!r}; fields: {fields}") from None

    @classmethod
    def of(cls: Type[R], value: Dict[str, Any]) -> R:
        """Read ``value`` (a dict the library made) as this report, nested reports too."""
        if not isinstance(value, dict):
            raise TypeError(f"{cls.__name__} is read from a dict, got {type(value).__name__}")
        out = cls()
        for key, v in value.items():
            out[key] = _convert(_fields(cls).get(key), v)
        return out

    @classmethod
    def check(cls, value: Dict[str, Any]) -> None:
        """Raise ``AssertionError`` naming every field this class and ``value`` do not share
        (here and in every nested report): the Python and Rust types must name the same."""
        problems: List[str] = []
        _check(cls, value, cls.__name__, problems)
        if problems:
            raise AssertionError("; ".join(problems))


def _fields(cls: type) -> Dict[str, Any]:
    hints: Dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass in (Report, dict, object) or not issubclass(klass, Report):
            continue
        hints.update(typing.get_type_hints(klass, vars(sys.modules[klass.__module__])))
    return hints


def _report_class(t: Any) -> Optional[Tuple[str, Type[Report]]]:
    """("one" | "list", the Report class) if annotation ``t`` holds a report, else None."""
    if isinstance(t, type) and issubclass(t, Report):
        return ("one", t)
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return _report_class(inner[0]) if len(inner) == 1 else None
    if origin in (list, List) and args and isinstance(args[0], type) and issubclass(args[0], Report):
        return ("list", args[0])
    return None


def _convert(t: Any, v: Any) -> Any:
    rc = _report_class(t)
    if rc is None or v is None:
        return v
    kind, cls = rc
    if kind == "one":
        return cls.of(v)
    return [cls.of(x) for x in v]


def _check(cls: type, value: Any, where: str, problems: List[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where} is {type(value).__name__}, not a dict")
        return
    fields = _fields(cls)
    missing = sorted(set(fields) - set(value))
    extra = sorted(set(value) - set(fields))
    if missing:
        problems.append(f"{where}: the library gives no {', '.join(missing)}")
    if extra:
        problems.append(f"{where}: not declared: {', '.join(extra)}")
    for key, t in fields.items():
        rc = _report_class(t)
        if rc is None or value.get(key) is None:
            continue
        kind, inner = rc
        items = [value[key]] if kind == "one" else list(value[key])
        for i, item in enumerate(items):
            _check(inner, item, f"{where}.{key}" + ("" if kind == "one" else f"[{i}]"), problems)


# ---- shared ---------------------------------------------------------------------------


class Summary(Report):
    """Quantiles of a latency histogram (nanoseconds)."""

    count: int
    min_ns: int
    p50_ns: int
    p99_ns: int
    p999_ns: int
    max_ns: int
    mean_ns: float


# ---- the latency lab: rtloop.lab.loadtest ---------------------------------------------


class LoadTester(Report):
    """The emulated device's load: frames per second and words per loopback."""

    fps: int
    received_words: int
    transmitted_words: int


class HostReport(Report):
    """The host's side of a load test: blocks read, loopback latency, PercentUsed, work."""

    read_size: int
    seconds: float
    blocks: int
    bytes: int
    frames: int
    monitor_frames: int
    heartbeats: int
    loopbacks_sent: int
    latency: Summary
    histogram_us: List[int]
    beyond_1ms: int
    percent_used: List[Tuple[float, float]]
    percent_used_max: float
    queue_mean: float
    queue_max: int
    bytes_per_s: float
    # times the host's thread was preempted in the measured window, if known
    preempted: Optional[int]
    work: Optional[Summary]
    work_events: int


class DeviceReport(Report):
    """The emulated device's side: frames sent, FIFO high water, how it ended."""

    ended: str
    frames: int
    bytes: int
    seconds: float
    fps_achieved: float
    fps_configured: float
    fifo_high_water: int
    fifo_high_water_percent: float
    fifo_high_water_run: int
    loopbacks: int
    lateness: Summary
    # the most load-tester frames made in one step: after a stall of its own the device makes
    # up the frames it missed at twice its rate, so this stays a few frames (7 at 60 kHz)
    burst_max_frames: int
    # the catch-up window (ns) of the step that made them: at most this over half the frame
    # period, plus one; 50 µs unless the device's own last two steps were both longer
    burst_window_ns: int
    # times the device process was preempted in the measured window, if known
    preempted: Optional[int]
    # frames made in the measured window, its seconds, and the rate: more than 2 % below
    # fps_configured makes the run "overloaded"
    frames_measured: int
    seconds_measured: float
    fps_measured: float


class LoadtestReport(Report):
    """What `rtloop.lab.loadtest` returns (``rtloop lab loadtest --json``)."""

    load: LoadTester
    transport: str
    read_size: int
    bytes_per_s_configured: float
    reference_pingpong: Optional[Summary]
    # a bare loop sampled as the run's loopbacks: as many stamps over the same seconds, made
    # on schedule on the device's CPU, echoed on the host's, each a whole loop
    # (as HubClockDelta)
    reference_paced: Optional[Summary]
    stolen_ms: Optional[float]
    stolen_percent: Optional[float]
    host: Optional[HostReport]
    device: Optional[DeviceReport]
    error: Optional[str]
    verdict: str
    verdict_notes: str


class TuneReport(Report):
    """What `rtloop.lab.tune` returns (``rtloop lab tune --json``): every step, the smallest
    stable ReadSize and the one recommended (or, for a rate sweep, the last stable rate)."""

    sweep: str
    load: LoadTester
    min_read_size: int
    # per step: read_size, fps (configured), fps_achieved (made), class (stable, unstable,
    # overloaded, ...), latency, percent_used_*, notes, reference_p99_ns, tail_bound_ns and
    # qualifies (whether a recommendation may come from it)
    steps: List[Dict[str, Any]]
    recommended_read_size: Optional[int]
    # why there is none, if none
    no_recommendation: Optional[str]
    smallest_stable: Optional[int]
    last_good_fps: Optional[int]
    last_good_bytes_per_s: Optional[float]


# ---- the runtime: rtloop.runtime.run --------------------------------------------------


class Realtime(Report):
    """Which realtime set-up the run was permitted."""

    fifo: bool
    mlock: bool
    pin: bool


class MinimumTick(Report):
    """The shortest tick this machine can schedule, and how it was found."""

    min_ns: int
    wake_p90_ns: int
    handoff_p90_ns: int


class Delay(Report):
    """How far a block's output lags its input."""

    samples: float
    ms: float


class ProcessTiming(Report):
    """One process of a model: its ticks, execution time, misses and its driver's summary."""

    name: str
    kind: str
    runs: str
    core: Optional[int]
    ticks: int
    exec: Optional[Summary]
    done_after_start: Optional[Summary]
    misses: int
    input_overruns: int
    summary: str
    error: Optional[str]
    delay: Optional[Delay]


class RunReport(Report):
    """What `rtloop.runtime.run` returns (``rtloop run --json``)."""

    model: str
    tick_ns: int
    ticks: int
    seconds: float
    realtime: Realtime
    minimum_tick: MinimumTick
    tick_start: Summary
    processes: List[ProcessTiming]
    stopped_by: str
    problem: Optional[str]
    out_dir: str


# ---- the recorder: rtloop.record(...).stop() -------------------------------------------


class RecordReport(Report):
    """One stream's recording, as `Recorder.stop` returns it (``rtloop record`` prints it)."""

    dir: str
    samples: int
    events: int
    lost_samples: int
    lost_events: int
    bytes: int
    seconds: float
    ended: str


# ---- the bridges: rtloop.bridge.*(...).stop() ------------------------------------------


class LslBridgeReport(Report):
    """What an LSL bridge moved (``rtloop bridge lsl-in`` / ``lsl-out --json``)."""

    lsl: str
    stream: str
    samples: int
    events: int
    time_correction: float
    outages: int


class BrainFlowBridgeReport(Report):
    """What the BrainFlow bridge moved (``rtloop bridge brainflow-in --json``)."""

    board: str
    brainflow: str
    streams: List[str]
    samples: int
    samples_by_preset: List[Tuple[str, int]]
    markers: int
    lost_samples: int
    outages: int
    reconnects: int
    ended: str


# ---- the benchmarks: rtloop.bench.* -------------------------------------------------------
# The top level of each report is declared (and checked against the library's type); rows and
# nested tables stay dicts, as `--json` prints them.


class BenchMachine(Report):
    """What the stream benchmark ran on."""

    cpus: int
    pm_qos: bool


class StreamBenchReport(Report):
    """`rtloop.bench.stream` (``rtloop bench stream --json``): throughput against a bare ring
    (and memcpy for the copy-out row), hand-off latency against a cache-line ping-pong
    (spinning rows) and a futex ping-pong (the blocking row); each latency row names its
    ``reference``."""

    machine: BenchMachine
    repeats: int
    throughput: List[Dict[str, Any]]
    latency: List[Dict[str, Any]]
    # spin, then sleep: one row per spin budget (samples after random 0-100 µs gaps)
    wake_sweep: List[Dict[str, Any]]


class FieldTripBenchReport(Report):
    """`rtloop.bench.fieldtrip` (``rtloop bench fieldtrip --json``): the FAQ table and the
    time per write, each against the reference server measured in the same run."""

    seconds_per_cell: float
    poll: str
    versus_reference: List[Dict[str, Any]]
    faq_best_dma_values_per_s: float
    faq: List[Dict[str, Any]]
    latency: List[Dict[str, Any]]
    #: a client reading every 200 µs, per server: time per read and the server's CPU
    paced: List[Dict[str, Any]]


class PipelineBenchReport(Report):
    """`rtloop.bench.pipeline` (``rtloop bench pipeline --json``): each stage's rate against
    the profile's, the recorder and replay against their same-run references."""

    profile: str
    channels: int
    rate: float
    dtype: str
    required_mb_per_s: float
    disk_raw_mb_per_s: float
    disk_same_writes_mb_per_s: float
    recorder_over_disk: float
    recorder_goal: float
    recorder_verdict: str
    replay_mb_per_s: float
    replay_needed_verdict: str
    replay_reference_mb_per_s: float
    replay_over_reference: float
    replay_goal: float
    replay_verdict: str
    stages: List[Dict[str, Any]]
    together_mb_per_s: float
    together_headroom: float
    limiting_stage: str
    verdict: str


class RuntimeBenchReport(Report):
    """`rtloop.bench.runtime` (``rtloop bench runtime --json``): tick jitter against a bare
    timer loop, UDP echo against plain loopback and the same work, the closed loop, numerics."""

    machine: str
    bare_timer: Optional[Summary]
    runtime_tick_start: Optional[Summary]
    empty_python_module: Optional[Summary]
    udp_echo: List[Dict[str, Any]]
    udp_reference: List[Dict[str, Any]]
    udp_same_work: List[Dict[str, Any]]
    closed_loop: Optional[Summary]
    closed_loop_bare: Optional[Summary]
    closed_loop_on_arrival: Optional[Summary]
    numerics: Optional[Summary]
    numerics_misses: Optional[int]
    rows: List[Dict[str, Any]]


class PeersBenchReport(Report):
    """`rtloop.bench.peers` (``rtloop bench peers --json``): the stream beside LSL, ZeroMQ, a
    UNIX socket and iceoryx2, latency and throughput per transport, chunk and readers."""

    machine: str
    channels: int
    rate: float
    sample_bytes: int
    rounds: int
    transports: List[Dict[str, Any]]
    rows: List[Dict[str, Any]]
    verdict: Dict[str, Any]


class VerifyReport(Report):
    """`rtloop.bench.verify` (``rtloop verify --json``): every packet checked end to end;
    ``errors``, ``lost`` and ``missing`` are 0 in a passing run."""

    packets_per_pair: int
    pairs: int
    packet_bytes: int
    capacity: int
    mode: str
    check: str  # type: ignore[assignment]  # read it as report["check"]: check() is the method
    batch: int
    ok: int
    errors: int
    lost: int
    missing: int
    packets_per_s: float
    gb_per_s: float
    results: List[Dict[str, Any]]


# ---- replay: rtloop.replay.play(...).stop() ----------------------------------------------


class ReplayReport(Report):
    """One series played into a stream (``rtloop replay --json``)."""

    stream: str
    format: str
    series: str
    samples: int
    events: int
    seconds: float
    recorded_seconds: float
    bytes: int
