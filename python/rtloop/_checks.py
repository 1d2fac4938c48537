"""Argument checks with explanatory messages (mne-lsl style)."""

from __future__ import annotations

import operator
from typing import Any, Sequence, Tuple, Type, Union

_TypeSpec = Union[Type[Any], Tuple[Type[Any], ...]]


def _type_name(t: Type[Any]) -> str:
    return "None" if t is type(None) else t.__name__


def check_type(item: Any, types: _TypeSpec, item_name: str) -> None:
    """Raise a :class:`TypeError` unless ``item`` is an instance of ``types``.

    ``bool`` is not accepted where ``int`` is asked for.
    """
    allowed = types if isinstance(types, tuple) else (types,)
    ok = isinstance(item, allowed)
    if ok and isinstance(item, bool) and bool not in allowed and int in allowed:
        ok = False
    if not ok:
        names = [f"'{_type_name(t)}'" for t in allowed]
        expected = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        raise TypeError(
            f"The '{item_name}' parameter must be an instance of {expected}, "
            f"but got {type(item).__name__!r} instead."
        )


def check_value(item: Any, allowed_values: Sequence[Any], item_name: str) -> None:
    """Raise a :class:`ValueError` unless ``item`` is one of ``allowed_values``."""
    if item not in allowed_values:
        options = [repr(v) for v in allowed_values]
        if len(options) == 1:
            allowed = options[0]
        else:
            allowed = ", ".join(options[:-1]) + " and " + options[-1]
        raise ValueError(
            f"Invalid value for the '{item_name}' parameter. Allowed values are "
            f"{allowed}, but got {item!r} instead."
        )


U64_MAX = 2**64 - 1


def ensure_int(item: Any, item_name: str, minimum: int = 0, maximum: int = U64_MAX) -> int:
    """Return ``item`` as an ``int`` (any integer type, not ``bool``) within
    ``[minimum, maximum]`` (sample counts and indices are unsigned 64-bit)."""
    if isinstance(item, bool):
        raise TypeError(f"The '{item_name}' parameter must be an integer, but got a bool instead.")
    try:
        value = operator.index(item)
    except TypeError:
        raise TypeError(
            f"The '{item_name}' parameter must be an integer, "
            f"but got {type(item).__name__!r} instead."
        ) from None
    if value < minimum or value > maximum:
        top = "2**64 - 1" if maximum == U64_MAX else str(maximum)
        raise ValueError(
            f"Invalid value for the '{item_name}' parameter. Allowed values are integers "
            f"from {minimum} to {top}, but got {value} instead."
        )
    return value


def ensure_timeout(item: Any, item_name: str = "timeout") -> Union[float, None]:
    """Return a timeout in seconds (``None`` = wait forever) or raise with what is allowed."""
    if item is None:
        return None
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        raise TypeError(
            f"The '{item_name}' parameter must be None or a number of seconds, "
            f"but got {type(item).__name__!r} instead."
        )
    value = float(item)
    if not value >= 0.0:
        raise ValueError(
            f"Invalid value for the '{item_name}' parameter. Allowed values are None "
            f"(wait forever) or a number of seconds >= 0, but got {item!r} instead."
        )
    return value
