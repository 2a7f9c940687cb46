"""Immutable records that cost nothing to define.

``typing.NamedTuple`` (and ``collections.namedtuple``) pull ``typing``/``enum``/
``re``/``collections`` into the interpreter, about 10 ms of start-up on every
build stage (the driver starts once per stage).  :class:`Record` gives the
parts of the ``NamedTuple`` API the wrapper uses -- positional and keyword
construction with defaults, ``_fields``, ``_field_defaults``, ``_asdict()``,
``_replace()``, equality, ``repr`` -- with ``__slots__`` and no imports.

Subclasses list their fields in ``_fields`` and the defaults of the trailing
ones in ``_field_defaults``; attributes are read-only after construction.
"""

from __future__ import annotations

__all__ = ["Record"]

_MISSING = object()


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _field_defaults: dict[str, object] = {}

    def __init__(self, *args: object, **kwargs: object) -> None:
        fields = self._fields
        if len(args) > len(fields):
            raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, got {len(args)}")
        values = dict(zip(fields, args))
        for k, v in kwargs.items():
            if k not in fields:
                raise TypeError(f"{type(self).__name__}() got an unexpected keyword argument {k!r}")
            if k in values:
                raise TypeError(f"{type(self).__name__}() got multiple values for argument {k!r}")
            values[k] = v
        for name in fields:
            value = values.get(name, _MISSING)
            if value is _MISSING:
                value = self._field_defaults.get(name, _MISSING)
                if value is _MISSING:
                    raise TypeError(f"{type(self).__name__}() missing required argument {name!r}")
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _asdict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self._fields}

    def _replace(self, **changes: object) -> "Record":
        return type(self)(**{**self._asdict(), **changes})

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(tuple(getattr(self, name) for name in self._fields))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._fields)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields)
        return f"{type(self).__name__}({inner})"
