"""Named types that may appear in state: dataclasses, pydantic models, enums, and
other classes given with a pair of functions (their fields out, the object back).

Only registered types are saved, and they are saved by their registered name,
never by import path, so renaming a module does not orphan old checkpoints and
nothing in a checkpoint can make the loader import arbitrary code.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any, TypeVar

from savegame.errors import ConfigurationError

T = TypeVar("T")

_by_name: dict[str, type[Any]] = {}
_by_type: dict[type[Any], str] = {}
#: Names registered by :func:`admit`, not by the user: one may be bound again, to a class
#: of the same name defined anew (a class made in a function, redefined on each call),
#: and an explicit :func:`register` takes it over.
_admitted: set[str] = set()
_adapters: dict[
    type[Any], tuple[Callable[[Any], dict[str, Any]], Callable[[dict[str, Any]], Any]]
] = {}


def register(
    cls: type[T] | None = None,
    *,
    name: str | None = None,
    fields: Callable[[Any], dict[str, Any]] | None = None,
    rebuild: Callable[[dict[str, Any]], Any] | None = None,
) -> Any:
    """Allow a dataclass, pydantic model or Enum in saved state under a stable name.

    Usable as ``@register``, ``@register(name="Order")`` or ``register(Order)``. Any
    other class is allowed with ``fields`` (an instance -> its field values, each saved
    as state is) and ``rebuild`` (those values -> the instance) given together.

    Raises:
        ConfigurationError: the type is not a dataclass, pydantic model or Enum and
            has no ``fields``/``rebuild`` pair, or the name is taken by another type.
    """
    if (fields is None) != (rebuild is None):
        raise ConfigurationError("register: give fields and rebuild together, or neither")

    def apply(target: type[T]) -> type[T]:
        key = name or f"{target.__module__}.{target.__qualname__}"
        if fields is None and not storable(target):
            raise ConfigurationError(
                f"cannot register {target.__qualname__}: only dataclasses, pydantic models and enums can be saved"
            )
        existing = _by_name.get(key)
        if existing is not None and existing is not target and key not in _admitted:
            raise ConfigurationError(
                f"type name {key!r} is already registered for {existing.__qualname__}"
            )
        _admitted.discard(key)
        _by_name[key] = target
        _by_type[target] = key
        if fields is not None and rebuild is not None:
            _adapters[target] = (fields, rebuild)
        return target

    if cls is not None:
        return apply(cls)
    return apply


def admit(cls: type[Any], name: str) -> bool:
    """Register a dataclass, pydantic model or enum under ``name`` on a saver's behalf
    (:mod:`savegame.codec._conventions`); False when ``name`` is the user's for another class."""
    existing = _by_name.get(name)
    if existing is not None and existing is not cls and name not in _admitted:
        return False
    if existing is None or name in _admitted:
        _admitted.add(name)
    _by_name[name] = cls
    _by_type[cls] = name
    return True


def name_of(cls: type[Any]) -> str | None:
    return _by_type.get(cls)


def type_named(name: str) -> type[Any] | None:
    return _by_name.get(name)


def storable(cls: type[Any]) -> bool:
    """A class the codec can save by its fields once it is registered."""
    return _is_dataclass_type(cls) or _is_pydantic_type(cls) or issubclass(cls, enum.Enum)


#: Whether a class is a dataclass, once a class: ``build`` asks for every object it
#: decodes, and on a pydantic model class ``is_dataclass``'s attribute look-up goes
#: through the metaclass's ``__getattr__``, which raises (6.5 % of a chat turn's samples,
#: decoding the thread's messages). Bounded, as _byvalue's class caches are: a process
#: may make classes as it goes.
_DATACLASSES: dict[type[Any], bool] = {}
_DATACLASSES_KEPT = 4096


def _is_dataclass_type(cls: type[Any]) -> bool:
    found = _DATACLASSES.get(cls)
    if found is None:
        if len(_DATACLASSES) >= _DATACLASSES_KEPT:
            _DATACLASSES.clear()
        found = _DATACLASSES[cls] = dataclasses.is_dataclass(cls)
    return found


def _is_pydantic_type(cls: type[Any]) -> bool:
    return callable(getattr(cls, "model_validate", None)) and callable(
        getattr(cls, "model_dump", None)
    )


def fields_of(obj: Any) -> dict[str, Any]:
    """The field values of a registered dataclass or pydantic instance, shallow."""
    kind = type(obj)
    adapter = _adapters.get(kind)
    if adapter is not None:
        return adapter[0](obj)
    names = _names.get(kind)
    if names is None:
        names = _field_names(kind)
    # Shallow: nested models stay objects so the encoder can name them itself.
    return {key: getattr(obj, key) for key in names}


def field_names(kind: type[Any]) -> tuple[str, ...] | None:
    """The names :func:`fields_of` reads from an instance of ``kind``, in its order; None
    for a class registered with a ``fields`` function. For the encoder, which reads each
    field as it encodes it instead of building the dict first."""
    if kind in _adapters:
        return None
    names = _names.get(kind)
    return _field_names(kind) if names is None else names


#: The fields :func:`fields_of` reads, by class. Bounded, as ``_byvalue``'s cache: a
#: process that makes classes as it goes (pydantic's create_model per request) must not
#: keep every one of them alive here.
_names: dict[type[Any], tuple[str, ...]] = {}
_NAMES_KEPT = 4096


def _field_names(kind: type[Any]) -> tuple[str, ...]:
    """The names, found once per class: ``dataclasses.fields`` walked the class on every
    call, and ``is_dataclass`` of a pydantic model went through its metaclass's
    ``__getattr__`` (a fifth of encoding a LangChain message). A class's fields are fixed
    once it has instances: pydantic builds none of a model not complete, and a rebuild
    keeps the names."""
    if dataclasses.is_dataclass(kind):
        names = tuple(f.name for f in dataclasses.fields(kind))
    else:
        fields: dict[str, Any] = kind.model_fields
        names = tuple(fields)
    if len(_names) >= _NAMES_KEPT:
        _names.clear()
    _names[kind] = names
    return names


def build(cls: type[Any], values: dict[str, Any]) -> Any:
    adapter = _adapters.get(cls)
    if adapter is not None:
        return adapter[1](values)
    if issubclass(cls, enum.Enum):
        return cls(values["value"])
    if _is_dataclass_type(cls):
        init = {
            f.name: values[f.name] for f in dataclasses.fields(cls) if f.init and f.name in values
        }
        obj = cls(**init)
        for f in dataclasses.fields(cls):
            if not f.init and f.name in values:
                object.__setattr__(obj, f.name, values[f.name])
        return obj
    return cls.model_validate(values)
