"""The tick runtime from Python: run a model, and the host of a model's Python modules.

A Python module of a model is a file with a ``step`` function. Each tick rtloop calls it
with one numpy array per input signal (read-only views with the signal's history as the
first axis when ``history > 1``) followed by one writable array per output signal (views
straight into the output streams), in the order of the model's ``in:`` and ``out:``::

    # filt.py  (in: [raw], out: [filtered])
    import numpy as np

    def step(raw, filtered):
        filtered[:] = raw.mean(axis=0)

``step`` may instead return its outputs (one array, or a tuple with one per output), each of
exactly the signal's shape and dtype. An optional ``finish()`` runs when the model stops; a
string it returns appears in the report. Code at module level runs once, before tick 0.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple, Union

__all__ = ["run"]


def run(
    model: Union[str, "os.PathLike[str]"],
    *,
    seconds: Optional[float] = None,
    ticks: Optional[int] = None,
    keep: bool = False,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    check: bool = True,
) -> Dict[str, Any]:
    """Run a model with ``rtloop run`` until its limit and return the timing report (the
    ``--json`` dictionary). With ``check`` (default), a refused model or a failed run raises
    ``RuntimeError`` with rtloop's message."""
    cmd = [sys.executable, "-m", "rtloop", "--json", "run", os.fspath(model), "--quiet"]
    if seconds is not None:
        cmd += ["--seconds", str(seconds)]
    if ticks is not None:
        cmd += ["--ticks", str(ticks)]
    if keep:
        cmd.append("--keep")
    if out is not None:
        cmd += ["--out", os.fspath(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    report: Optional[Dict[str, Any]] = None
    if proc.stdout.strip():
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            report = None
    if check and (proc.returncode != 0 or report is None):
        raise RuntimeError(
            f"rtloop run {os.fspath(model)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
        )
    if report is None:
        report = {"problem": proc.stderr.strip(), "exit": proc.returncode}
    return report


def _zeros(spec: Tuple[Sequence[int], str], writable: bool) -> Any:
    """Zeros of the type a module's step receives: C-contiguous, aligned, and read-only for
    an input (the runtime hands inputs as read-only views). numba compiles one signature per
    array type, so the warm-up must use exactly these or tick 0 compiles again."""
    import numpy as np

    shape, dtype = spec
    a = np.zeros(tuple(shape), dtype=dtype)
    a.setflags(write=writable)
    return a


def _load_module(
    path: str,
    numba: bool,
    name: str,
    inputs: Sequence[Tuple[Sequence[int], str]],
    outputs: Sequence[Tuple[Sequence[int], str]],
) -> Tuple[Any, Any]:
    """Import a module file and return ``(step, finish or None)``. With ``numba``, ``step``
    is compiled with ``numba.njit`` and called once on zero arrays of exactly the types it
    will receive (the signals' shapes and dtypes, inputs read-only), so compilation happens
    before tick 0, not during it."""
    spec = importlib.util.spec_from_file_location(f"rtloop_module_{name}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).parent))
    spec.loader.exec_module(mod)
    step = getattr(mod, "step", None)
    if not callable(step):
        raise AttributeError(
            f"{path} has no step function: define `def step({', '.join(['in'] * len(inputs) + ['out'] * len(outputs)) or ''}): ...`"
        )
    if numba:
        import numba as nb

        step = nb.njit(step)
        step(*[_zeros(s, False) for s in inputs], *[_zeros(s, True) for s in outputs])
        # anything else would compile during a tick: refuse to start instead
        if len(step.signatures) != 1:
            raise RuntimeError(f"numba compiled {len(step.signatures)} signatures while warming up")
    finish = getattr(mod, "finish", None)
    return step, finish if callable(finish) else None


def _main(argv: Sequence[str]) -> int:
    # Ctrl-C reaches the whole process group; the supervisor stops the model through its
    # board, so this process must not die on SIGINT by itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ._rtloop import runtime_module

    return runtime_module(list(argv))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
