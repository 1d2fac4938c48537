"""The ``rtloop`` logger: Python's records and the Rust core's (handed over by pyo3-log).

The level comes from the environment variable ``RTLOOP_LOG`` (``error``, ``warning``,
``info``, ``debug``, ``trace``) and defaults to ``warning``; :func:`set_log_level` changes it.
"""

from __future__ import annotations

import logging
import os
from typing import Union

logger = logging.getLogger("rtloop")

_LEVELS = {
    "trace": 5,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
_installed = False


def _level(level: Union[int, str]) -> int:
    from ._checks import check_type, check_value

    check_type(level, (int, str), "level")
    if isinstance(level, str):
        level = level.strip().lower()
        check_value(level, tuple(_LEVELS), "level")
        return _LEVELS[level]
    return level


def set_log_level(level: Union[int, str, None]) -> None:
    """Set the level of rtloop's log output, Python's and the Rust core's.

    Parameters
    ----------
    level : int | str | None
        A :mod:`logging` level or one of ``"trace"``, ``"debug"``, ``"info"``,
        ``"warning"``, ``"error"``, ``"critical"``. ``None`` reads ``RTLOOP_LOG`` again
        (default ``"warning"``).
    """
    if level is None:
        level = os.environ.get("RTLOOP_LOG", "warning") or "warning"
    logger.setLevel(_level(level))
    from . import _rtloop

    _rtloop._reset_logging()


def init_logging() -> None:
    """Route the Rust core's records to ``logging`` and apply ``RTLOOP_LOG`` (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    from . import _rtloop

    _rtloop._init_logging()
    env = os.environ.get("RTLOOP_LOG")
    try:
        set_log_level(env)
    except (TypeError, ValueError):
        logger.warning("ignoring RTLOOP_LOG=%r: not a log level", env)
        set_log_level("warning")
