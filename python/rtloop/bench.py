"""The benchmarks, from Python: each function runs the benchmark ``rtloop bench ...`` (and
``rtloop verify``) runs, in the package's ``rtloop`` executable (the native module does not
link the benchmarks), with the same options as keyword arguments (the command's long options
with ``_`` for ``-``), and returns its report typed, the object ``--json`` prints::

    import rtloop.bench
    r = rtloop.bench.verify(packets=100_000)
    print(r.ok, r.errors, r.lost, r.packets_per_s)

Every figure in a report sits next to a reference measured in the same run. Progress goes to
the ``rtloop.bench`` logger. Python modules a benchmark runs run with this interpreter. A
keyword the benchmark does not have, or a value out of its range, raises ``ValueError`` saying
what is allowed; a run that fails raises ``RuntimeError``.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from typing import IO, Any, Dict, List, Type, TypeVar

from .reports import (
    FieldTripBenchReport,
    PeersBenchReport,
    PipelineBenchReport,
    Report,
    RuntimeBenchReport,
    StreamBenchReport,
    VerifyReport,
)

__all__ = ["stream", "fieldtrip", "pipeline", "runtime", "peers", "verify"]

R = TypeVar("R", bound=Report)


def _forward(lines: IO[str], errors: List[str]) -> None:
    """The benchmark's progress lines to the ``rtloop.bench`` logger; its error lines kept."""
    log = logging.getLogger("rtloop.bench")
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("info: "):
            log.info("%s", line[6:])
        elif line.startswith("warn: "):
            log.warning("%s", line[6:])
        elif line.startswith("rtloop: error: "):
            errors.append(line[len("rtloop: error: "):])
        elif line:
            errors.append(line)


def _run(name: str, report: Type[R], config: Dict[str, Any]) -> R:
    from ._cli import executable, missing_executable

    exe = executable()
    if not os.access(exe, os.X_OK):
        raise RuntimeError(missing_executable())
    for k, v in list(config.items()):
        if isinstance(v, os.PathLike):
            config[k] = os.fspath(v)
    # Python modules the benchmark runs (the runtime benchmark's) run with this interpreter
    env = dict(os.environ)
    env.setdefault("RTLOOP_PYTHON", sys.executable)
    proc = subprocess.Popen(
        [os.fspath(exe), "bench", "from-json", name, json.dumps(config)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    errors: List[str] = []
    progress = threading.Thread(target=_forward, args=(proc.stderr, errors), daemon=True)
    progress.start()
    try:
        out = proc.stdout.read()
        code = proc.wait()
    except BaseException:
        # Ctrl-C or another exception here: the benchmark does not outlive the call
        proc.kill()
        proc.wait()
        raise
    finally:
        progress.join()
        proc.stdout.close()
        proc.stderr.close()
    message = "; ".join(errors) or f"rtloop bench {name} exited with {code}"
    if code == 2:
        raise ValueError(message)
    if code != 0:
        raise RuntimeError(message)
    return report.of(json.loads(out))


def stream(**config: Any) -> StreamBenchReport:
    """Stream throughput against a bare ring doing the same work (and memcpy for the copy-out
    row), and one-way latency against a cache-line ping-pong (spinning) and a futex ping-pong
    (blocking) (``rtloop bench stream``). Options: ``quick``,
    ``repeats`` (1-50, default 5), ``pm_qos``, ``out`` (a directory for results.json and the
    PNG charts)."""
    return _run("stream", StreamBenchReport, config)


def fieldtrip(**config: Any) -> FieldTripBenchReport:
    """FieldTrip's buffer benchmark against ``rtloop serve`` and a reference server doing
    what FieldTrip's C server does, measured in the same run (``rtloop bench fieldtrip``).
    Options: ``quick``, ``seconds``, ``transports`` (of tcp, unix, inproc), ``stateless``,
    ``latency_channels`` (1-4096), ``rounds`` (10-1000000), ``poll``, ``no_reference``,
    ``out``."""
    return _run("fieldtrip", FieldTripBenchReport, config)


def pipeline(**config: Any) -> PipelineBenchReport:
    """Where an acquisition pipeline's ceiling is, stage by stage, against a profile's data
    rate (``rtloop bench pipeline``). Options: ``profile`` (neuropixels, intan64, custom),
    ``probes`` (1-64), ``channels``, ``rate`` and ``dtype`` (custom profile), ``readers``
    (1-8), ``seconds``, ``quick``, ``dir`` (where the recorder and replay stages write),
    ``out``."""
    return _run("pipeline", PipelineBenchReport, config)


def runtime(**config: Any) -> RuntimeBenchReport:
    """The tick runtime against same-run references (``rtloop bench runtime``). Options:
    ``seconds``, ``part_seconds``, ``quick``, ``packets`` (UDP packets per 1 ms tick),
    ``no_python``, ``out``."""
    return _run("runtime", RuntimeBenchReport, config)


def peers(**config: Any) -> PeersBenchReport:
    """The stream beside LSL, ZeroMQ, a UNIX socket and iceoryx2 (``rtloop bench peers``).
    Options: ``transports`` (stream, lsl, zmq-ipc, zmq-tcp, unix, iceoryx2), ``chunks``,
    ``readers``, ``channels``, ``rate``, ``wait`` (auto, block, spin), ``rounds`` (1-20),
    ``seconds``, ``min_chunks``, ``throughput_seconds``, ``stream_spin_us`` (0-10000),
    ``quick``, ``out``."""
    return _run("peers", PeersBenchReport, config)


def verify(**config: Any) -> VerifyReport:
    """Every packet checked end to end through streams, generator and receiver each in its
    own process (``rtloop verify``). Options: ``packets``, ``pairs``, ``packet_bytes`` (a
    multiple of 8), ``capacity``, ``mode`` (lossless, latest), ``batch``, ``check`` (all,
    first). The report's ``check`` field is ``report["check"]`` (``check`` is also the
    method that compares a report with its type)."""
    return _run("verify", VerifyReport, config)
