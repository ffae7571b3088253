"""Frozen value types that cost nothing to define: :class:`Record`.

``@dataclass(frozen=True)`` writes six methods per class (``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__``, ``__delattr__``) as source text and compiles each with ``exec``: about
3.5 million instructions, a millisecond, per class, paid on every start-up. A command that imports
twenty of them (the typed remedies, the catalogue's rows, the Plan) pays 20 ms before it reads a
fact. A :class:`Record` subclass is read once from its annotations and shares one set of generic
methods, so defining it costs what defining a plain class costs.

It behaves as the frozen dataclass it replaces: fields in annotation order (a base's first), each
with its default (a plain value, or :func:`field` ``(default=…, kw_only=…)``), keyword-only fields
after the positional ones in ``__init__``; equal when of the same class with equal fields, hashed by
its fields, ``repr`` as ``Name(a=1, b='x')``, assignment raising ``dataclasses.FrozenInstanceError``,
``__match_args__`` set; it pickles and copies as a plain object. It is not a dataclass
(``dataclasses.replace``/``fields`` do not apply; :meth:`Record.replace` is its ``replace``): use it for
types nothing introspects.

Only ``sys`` and ``typing`` are imported here, :mod:`dataclasses` only to raise its
``FrozenInstanceError``: importing it imports :mod:`inspect`, 13 ms that start-up, which builds a Plan
before it starts its early children, must not pay.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: Any) -> Any:
        return lambda cls: cls

__all__ = ["Record", "field"]

_T = TypeVar("_T")


class _Missing:
    pass


_MISSING: Any = _Missing()


class _Field:
    __slots__ = ("default", "kw_only")

    def __init__(self, default: Any, kw_only: bool) -> None:
        self.default, self.kw_only = default, kw_only


def field(*, default: _T, kw_only: bool = False) -> _T:
    """A field's default, keyword-only with ``kw_only=True`` (``dataclasses.field`` for a Record)."""
    return _Field(default, kw_only)  # type: ignore[return-value]


def _field_default(name: str, value: Any) -> tuple[Any, bool]:
    """(default or _MISSING, kw_only) of a field's class value: a :func:`field`, a ``dataclasses.field(...)``,
    or a plain default."""
    if isinstance(value, _Field):
        return value.default, value.kw_only
    dc = sys.modules.get("dataclasses")  # a dataclasses.Field exists only once dataclasses is imported
    if dc is None or not isinstance(value, dc.Field):
        return value, False
    if value.default_factory is not dc.MISSING:
        raise TypeError(f"{name}: a Record field takes no default_factory")
    return (_MISSING if value.default is dc.MISSING else value.default), value.kw_only is True


def _frozen(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Record:
    """Base of a frozen record type: subclass it and annotate its fields (see the module)."""

    #: Every field, bases' first (the order of ``repr``, ``==`` and ``hash``).
    _fields: ClassVar[tuple[str, ...]] = ()
    #: The fields ``__init__`` takes by position, in order, then the keyword-only ones.
    _positional: ClassVar[tuple[str, ...]] = ()
    _keyword: ClassVar[tuple[str, ...]] = ()
    _defaults: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields, kw_only = list(cls._fields), {n for n in cls._keyword}
        defaults = dict(cls._defaults)
        for name, annotation in cls.__dict__.get("__annotations__", {}).items():
            if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            given = cls.__dict__.get(name, _MISSING)
            value, keyword = _field_default(f"{cls.__qualname__}.{name}", given)
            if keyword:
                kw_only.add(name)
            if value is not given:  # a field(): the class holds its default, as a dataclass's does
                if value is _MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, value)
            if isinstance(value, (list, dict, set)):
                raise ValueError(f"mutable default {type(value)} for field {name} is not allowed: use a tuple")
            if name not in fields:
                fields.append(name)
            if value is not _MISSING:
                defaults[name] = value
            else:
                defaults.pop(name, None)
        positional = tuple(n for n in fields if n not in kw_only)
        seen_default = False
        for name in positional:
            if name in defaults:
                seen_default = True
            elif seen_default:
                raise TypeError(f"non-default argument {name!r} follows default argument")
        cls._fields, cls._positional = tuple(fields), positional
        cls._keyword = tuple(n for n in fields if n in kw_only)
        cls._defaults = defaults
        setattr(cls, "__match_args__", positional)  # noqa: B010 - mypy types the transformed class's own

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        positional = cls._positional
        if len(args) > len(positional):
            raise TypeError(f"{cls.__qualname__}.__init__() takes {len(positional) + 1} positional arguments but "
                            f"{len(args) + 1} were given")
        values = dict(zip(positional, args, strict=False))
        for name, value in kwargs.items():
            if name in values:
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {name!r}")
            if name not in cls._defaults and name not in cls._fields:
                raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {name!r}")
            values[name] = value
        own = self.__dict__
        defaults = cls._defaults
        for name in cls._fields:
            if name in values:
                own[name] = values[name]
            elif name in defaults:
                own[name] = defaults[name]
            else:
                raise TypeError(f"{cls.__qualname__}.__init__() missing required argument: {name!r}")

    def _values(self) -> tuple[Any, ...]:
        own = self.__dict__
        return tuple(own[name] for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        own = self.__dict__
        return f"{type(self).__qualname__}({', '.join(f'{n}={own[n]!r}' for n in self._fields)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise _frozen(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise _frozen(f"cannot delete field {name!r}")

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes`` (``dataclasses.replace`` for a Record)."""
        own = self.__dict__
        return type(self)(**{**{n: own[n] for n in self._fields}, **changes})
