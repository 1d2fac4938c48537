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
exactly the signal's shape and dtype. Code at module level runs once, before tick 0.

Two optional hooks run outside the ticks, as LiCoRICE's constructor and destructor do:

* ``init(ctx, **options)`` runs once before tick 0 (and before numba compiles ``step``). What
  it returns is the module's state: a numpy array or a tuple of them, passed to ``step``
  after its outputs every tick (the same arrays, writable, so a filter keeps its state
  between ticks, with numba too: numba cannot write a module-level array). It
  receives a :class:`ModuleContext` (the module's name, tick, ``every``, output directory and
  each signal's shape, dtype and channel names) and the module's ``options:`` from the model
  file as keyword arguments, so its signature says which options the module takes: an
  unknown option, a missing one (a parameter without default) or one of the wrong type (by
  the parameter's annotation: ``int``, ``float``, ``str``, ``bool``, ``list``, ``dict``) is
  refused before the model starts, by ``rtloop run --check`` too.
* ``finish()`` or ``finish(ctx)`` runs when the model stops; a string it returns appears in
  the report.

A module with ``every: N`` in the model runs on ticks 0, N, 2N, ...; on the ticks between,
its outputs repeat the values it last wrote (give its inputs ``history: N`` to see every
tick's samples).
"""

from __future__ import annotations

import gc
import importlib.util
import inspect
import json
import os
import signal
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from .reports import RunReport

__all__ = ["run", "ModuleContext", "SignalInfo"]


@dataclass(frozen=True)
class SignalInfo:
    """One signal as a module sees it."""

    name: str
    #: the signal's shape per tick, as declared in the model
    shape: Tuple[int, ...]
    #: the shape of the array ``step`` receives (inputs with ``history > 1`` get the history
    #: as a first axis; a variable input's first axis is this tick's rows)
    array_shape: Tuple[int, ...]
    dtype: str
    history: int
    variable: bool
    #: one name per value of a row (the model's ``channels:``), empty if not given
    channels: Tuple[str, ...]


@dataclass(frozen=True)
class ModuleContext:
    """What ``init`` (and ``finish(ctx)``) get: the module and its signals."""

    name: str
    model: str
    #: the tick period in seconds
    tick_s: float
    #: the module runs on ticks that are multiples of this
    every: int
    #: the run's output directory (write the module's own files here)
    out_dir: Path
    #: the module's ``options:`` from the model file
    options: Dict[str, Any]
    inputs: Dict[str, SignalInfo]
    outputs: Dict[str, SignalInfo]


_OPTION_TYPES: Dict[Any, Tuple[type, ...]] = {
    int: (int,),
    float: (int, float),
    str: (str,),
    bool: (bool,),
    list: (list,),
    dict: (dict,),
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
    "list": (list,),
    "dict": (dict,),
}


def _call_init(init: Callable[..., Any], ctx: ModuleContext, path: str) -> Any:
    """Check the model's options against ``init``'s signature, then call it; returns what
    it returned (the module's state, or None)."""
    sig = inspect.signature(init)
    params = list(sig.parameters.values())
    shown = f"init{sig}"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise TypeError(f"{path}: {shown} must take the module's context as its first argument: def init(ctx, ...)")
    named = {p.name: p for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    takes_any = any(p.kind == p.VAR_KEYWORD for p in params)
    problems = []
    for key in ctx.options:
        if key not in named and not takes_any:
            problems.append(f"unknown option {key!r}; {shown} takes: {', '.join(named) or 'no options'}")
    for p in named.values():
        if p.default is p.empty and p.name not in ctx.options:
            problems.append(f"option {p.name!r} is required by {shown}; add it under options:")
        elif p.name in ctx.options and p.annotation in _OPTION_TYPES:
            v = ctx.options[p.name]
            want = _OPTION_TYPES[p.annotation]
            if not isinstance(v, want) or (bool not in want and isinstance(v, bool)):
                tname = p.annotation if isinstance(p.annotation, str) else p.annotation.__name__
                problems.append(f"option {p.name!r} is {v!r} ({type(v).__name__}); {shown} wants {tname}")
    if problems:
        raise ValueError(f"module {ctx.name!r}: options: " + "; ".join(problems))
    return init(ctx, **ctx.options)


def _state_of(returned: Any, path: str) -> Tuple[Any, ...]:
    """The module's state from what ``init`` returned: ``None`` (no state), a numpy array,
    or a tuple of them. Each is made C-contiguous once (numba compiles ``step`` for that
    layout) and must be writable: ``step`` gets the same arrays every tick."""
    import numpy as np

    if returned is None:
        return ()
    items = returned if isinstance(returned, tuple) else (returned,)
    state = []
    for k, a in enumerate(items):
        if not isinstance(a, np.ndarray):
            raise TypeError(
                f"{path}: init returned {type(a).__name__} as state {k}: return None, a numpy array or a "
                "tuple of numpy arrays (the module's state, passed to step after its outputs)"
            )
        if not a.flags.writeable:
            raise ValueError(f"{path}: init returned a read-only array as state {k}: step must be able to write it")
        state.append(np.ascontiguousarray(a))
    return tuple(state)


def _context(text: str) -> ModuleContext:
    """The context the module host describes as JSON."""
    d = json.loads(text)

    def sigs(items: Sequence[Dict[str, Any]]) -> Dict[str, SignalInfo]:
        return {
            x["name"]: SignalInfo(
                name=x["name"],
                shape=tuple(x["shape"]),
                array_shape=tuple(x["array_shape"]),
                dtype=x["dtype"],
                history=int(x["history"]),
                variable=bool(x["variable"]),
                channels=tuple(x["channels"]),
            )
            for x in items
        }

    return ModuleContext(
        name=d["name"],
        model=d["model"],
        tick_s=float(d["tick_s"]),
        every=int(d["every"]),
        out_dir=Path(d["out_dir"]),
        options=dict(d["options"]),
        inputs=sigs(d["inputs"]),
        outputs=sigs(d["outputs"]),
    )


def run(
    model: Union[str, "os.PathLike[str]"],
    *,
    seconds: Optional[float] = None,
    ticks: Optional[int] = None,
    keep: bool = False,
    out: Optional[Union[str, "os.PathLike[str]"]] = None,
    check: bool = True,
) -> RunReport:
    """Run a model until its limit and return its timing report (a `rtloop.reports.RunReport`:
    fields as attributes, still a dict): the same library call and the same report as
    ``rtloop --json run``, in this process (the model's processes start
    as their own processes). The report is written to the output directory (``out``,
    default ``out/<model name>``) as report.json beside the PNG histograms and what the
    sinks wrote. With ``check`` (default), a refused model or a failed run raises
    ``RuntimeError`` with rtloop's message; without, the report says what went wrong
    (``problem``). Ctrl-C stops the model at a tick boundary and raises
    ``KeyboardInterrupt``."""
    from ._rtloop import runtime_run

    # the model's processes re-run rtloop as `<this python> -m rtloop`
    os.environ.setdefault("RTLOOP_PYTHON", sys.executable)
    code, value, text = runtime_run(os.fspath(model), seconds, ticks, keep, None if out is None else os.fspath(out))
    if code == 2 or value is None:
        if check:
            raise RuntimeError(f"rtloop run {os.fspath(model)} refused the model (exit 2):\n{text}")
        # a refused model ran nothing: its report holds only the problem and the exit code
        return RunReport.of({"problem": text, "exit": 2})
    report = RunReport.of(value)
    if check and code != 0:
        raise RuntimeError(f"rtloop run {os.fspath(model)} failed (exit {code}): {report.get('problem')}")
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
    context: str = "",
) -> Tuple[Any, Any, Tuple[Any, ...]]:
    """Import a module file, run its ``init`` (with the context described by ``context``,
    JSON, and the options in it) and return ``(step, finish or None, state)``: ``state`` is
    what ``init`` returned, as a tuple of arrays ``step`` gets after its outputs; ``finish`` is
    wrapped to get the context if it takes an argument. With ``numba``, ``step`` is then
    compiled with ``numba.njit`` and called once on zero arrays of exactly the types it will
    receive (the signals' shapes and dtypes, inputs read-only), so compilation happens
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
    ctx = _context(context) if context else None
    init = getattr(mod, "init", None)
    if ctx is not None and ctx.options and not callable(init):
        raise ValueError(
            f"module {ctx.name!r}: options: {path} has no init(ctx, ...) to receive "
            f"{', '.join(ctx.options)}; define `def init(ctx, {', '.join(ctx.options)}): ...`"
        )
    state: Tuple[Any, ...] = ()
    if callable(init) and ctx is not None:
        state = _state_of(_call_init(init, ctx, path), path)
    if numba:
        import numba as nb

        step = nb.njit(step)
        # the warm-up writes into copies of the state: the first tick sees it as init left it
        step(*[_zeros(s, False) for s in inputs], *[_zeros(s, True) for s in outputs], *[a.copy() for a in state])
        # anything else would compile during a tick: refuse to start instead
        if len(step.signatures) != 1:
            raise RuntimeError(f"numba compiled {len(step.signatures)} signatures while warming up")
    # everything loaded so far lives as long as the module: collect once now and move it out
    # of the collector's reach (gc.freeze), so a collection during a tick only scans what the
    # ticks allocate; without it the first collections of a numba module's process (hundreds
    # of thousands of imported objects) took 2-4 ms inside early ticks
    gc.collect()
    gc.freeze()
    finish = getattr(mod, "finish", None)
    if not callable(finish):
        return step, None, state
    try:
        wants_ctx = len(inspect.signature(finish).parameters) >= 1
    except (TypeError, ValueError):
        wants_ctx = False
    if wants_ctx:
        bound = finish
        return step, lambda: bound(ctx), state
    return step, finish, state


def _main(argv: Sequence[str]) -> int:
    # Ctrl-C reaches the whole process group; the supervisor stops the model through its
    # board, so this process must not die on SIGINT by itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ._rtloop import runtime_module

    return runtime_module(list(argv))


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
