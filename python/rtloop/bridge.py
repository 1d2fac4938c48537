"""Bridges: Lab Streaming Layer in and out of streams, BrainFlow boards in.

Each function starts the same library code ``rtloop bridge lsl-in``, ``lsl-out`` and
``brainflow-in`` run, on a thread of this process that never needs the GIL, and returns a
`Bridge` once it is bridging. ``stop()`` ends it and returns its report, the object
``rtloop bridge ... --json`` prints::

    import rtloop.bridge
    with rtloop.bridge.lsl_in("EEG", by="type", stream="eeg") as b:
        ...                                 # stream "eeg" fills as the outlet sends
    print(b.report.samples)

liblsl comes from the pylsl wheel and libBoardController from the brainflow wheel (or
``$RTLOOP_LIBLSL`` / ``$RTLOOP_LIBBOARDCONTROLLER``); without them a bridge raises
``ImportError`` saying what to install.

Errors: a bad argument raises ``ValueError`` (an unknown board, an option a board needs, a
dtype LSL cannot carry); no matching LSL outlet within ``timeout``, ``TimeoutError``; a
stream that exists already or cannot be opened, the stream's own exception
(``rtloop.StreamExistsError``, ``rtloop.StreamNotFoundError``, ...); a library call that
failed, ``RuntimeError`` with the call and its error code.
"""

from __future__ import annotations

import json
from typing import Any, List, NamedTuple, Optional, Sequence, Type, Union

from .reports import BrainFlowBridgeReport, LslBridgeReport

__all__ = ["Bridge", "Board", "lsl_in", "lsl_out", "brainflow_in", "brainflow_boards"]

BridgeReport = Union[LslBridgeReport, BrainFlowBridgeReport]


class Bridge:
    """A running bridge. ``streams`` are the streams it writes (or, for ``lsl_out``, reads);
    ``stop()`` ends it (its streams are removed unless it was started with ``keep=True``) and
    returns its report; ``wait()`` waits for one that ends by itself (``seconds``, the end of
    a playback file). As a context manager it stops on exit, and ``report`` keeps the report."""

    def __init__(self, session: Any, report_type: Union[Type[LslBridgeReport], Type[BrainFlowBridgeReport]]) -> None:
        self._session = session
        self._report_type = report_type
        self.report: Optional[BridgeReport] = None

    @property
    def streams(self) -> List[str]:
        return list(self._session.streams)

    @property
    def description(self) -> str:
        """What it bridges, in words (the line ``rtloop bridge`` prints when ready)."""
        return str(self._session.description)

    @property
    def running(self) -> bool:
        return bool(self._session.running)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait until the bridge ends by itself, at most ``timeout`` seconds; True if it has."""
        return bool(self._session.wait(timeout))

    def stop(self) -> BridgeReport:
        """Stop the bridge, wait for it and return its report; raises the error it failed
        with. Calling it again returns the same report."""
        value = self._session.stop()
        if value is None:
            raise RuntimeError("the bridge ended without a report")
        self.report = self._report_type.of(value)
        return self.report

    def __enter__(self) -> "Bridge":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "ended"
        return f"<rtloop.bridge.Bridge {self.description} ({state})>"


def lsl_in(
    query: str,
    by: Optional[str] = None,
    stream: Optional[str] = None,
    timeout: float = 5.0,
    capacity: Optional[int] = None,
    seconds: Optional[float] = None,
    keep: bool = False,
) -> Bridge:
    """An LSL outlet on the network becomes a stream (``rtloop bridge lsl-in``).

    ``query`` is the outlet's name, else its type (``by="name"`` or ``"type"`` matches only
    that). The stream (named ``stream``, default the outlet's name) gets the outlet's channel
    labels, units, rate and dtype; LSL timestamps, with the inlet's time correction, become
    the samples' stamps; a string (marker) outlet becomes events. ``capacity``: samples kept
    (default 10 s of data, at least 65536). Runs for ``seconds``, or until ``stop()``. If the
    outlet vanishes the stream keeps what it has and the inlet reconnects when an outlet with
    the same source id returns."""
    from ._rtloop import BridgeSession

    return Bridge(BridgeSession.lsl_in(query, by, stream, timeout, capacity, seconds, keep), LslBridgeReport)


def lsl_out(
    stream: str,
    name: Optional[str] = None,
    type: str = "EEG",
    source_id: Optional[str] = None,
    seconds: Optional[float] = None,
) -> Bridge:
    """A stream becomes an LSL outlet (``rtloop bridge lsl-out``): name (default the
    stream's), content ``type``, ``source_id`` (default ``rtloop:<stream>``), rate, channel
    labels and units; the samples' stamps as LSL timestamps. Its events go to a second,
    ``Markers`` outlet named ``<name>-markers``."""
    from ._rtloop import BridgeSession

    return Bridge(BridgeSession.lsl_out(stream, name, type, source_id, seconds), LslBridgeReport)


class Board(NamedTuple):
    """A BrainFlow board: its name, its id, and the options it cannot do without."""

    name: str
    id: int
    needs: List[str]


def brainflow_boards() -> List[Board]:
    """Every board BrainFlow knows (``rtloop bridge brainflow-in --list-boards``); ``needs``
    names the options as keyword arguments of `brainflow_in` (``serial_port``, ...)."""
    from ._rtloop import brainflow_boards as boards

    return [Board(name, id, [n.lstrip("-").replace("-", "_") for n in needs]) for name, id, needs in boards()]


def brainflow_in(
    board: Union[str, int],
    *,
    serial_port: Optional[str] = None,
    ip_address: Optional[str] = None,
    ip_port: Optional[int] = None,
    ip_protocol: Optional[str] = None,
    mac_address: Optional[str] = None,
    other_info: Optional[str] = None,
    serial_number: Optional[str] = None,
    timeout: int = 0,
    file: Optional[str] = None,
    master_board: Optional[Union[str, int]] = None,
    config: Sequence[str] = (),
    name: Optional[str] = None,
    capacity: Optional[int] = None,
    seconds: Optional[float] = None,
    keep: bool = False,
    stall: float = 2.0,
    retry: float = 1.0,
) -> Bridge:
    """A BrainFlow board becomes streams, one per kind of data (``rtloop bridge
    brainflow-in``): ``<name>.eeg``, ``<name>.accel``, ... and ``<name>.board`` (package
    number, timestamp, marker), ``name`` defaulting to the board's short name.

    ``board`` is BrainFlow's name in any case, with or without ``_BOARD``, or its id. The
    keyword options are BrainFlow's input parameters (`brainflow_boards` says which a board
    needs); ``config`` strings are sent with ``config_board`` once the session is prepared.
    Each sample is stamped with BrainFlow's timestamp in rtloop's clock, a non-zero marker
    becomes a ``marker`` event, gaps in package numbers count as lost samples. A board silent
    for ``stall`` seconds is reported, released and prepared again every ``retry`` seconds;
    what was written stays. Returns once the board streams."""
    from ._rtloop import BridgeSession

    params = {
        "serial_port": serial_port or "",
        "ip_address": ip_address or "",
        "ip_port": int(ip_port or 0),
        "ip_protocol": ip_protocol,
        "mac_address": mac_address or "",
        "other_info": other_info or "",
        "serial_number": serial_number or "",
        "timeout": int(timeout),
        "file": file or "",
        "master_board": None if master_board is None else str(master_board),
    }
    if isinstance(config, str):
        raise TypeError("config: a list of strings (one config_board call each), not one string")
    session = BridgeSession.brainflow_in(
        str(board), json.dumps(params), list(config), name, capacity, seconds, keep, stall, retry
    )
    return Bridge(session, BrainFlowBridgeReport)
