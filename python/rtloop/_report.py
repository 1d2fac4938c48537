"""The base class of rtloop's reports (`rtloop.reports`, generated from the Rust report
types): a ``dict`` whose keys are also attributes, nested reports typed in turn."""

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
