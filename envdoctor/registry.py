"""Check registration: the built-in checks (listed explicitly) plus third-party checks from the
``envdoctor.checks`` entry-point group, loaded the same way (pluggy's lesson).

A plugin entry point names a module (every :class:`CheckSpec` in it is taken), a CheckSpec, or
a list of them. Duplicate ids fail loudly; a plugin that fails to import becomes a warning and
the run goes on. ``ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD=1`` turns discovery off.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from envdoctor.knowledge.factkeys import RegistryError, validate_fact_keys

from .model import Facts, Finding

ENTRY_POINT_GROUP = "envdoctor.checks"
AUTOLOAD_ENV = "ENVDOCTOR_DISABLE_PLUGIN_AUTOLOAD"
_ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: A symptom a check owns: a fact key or family, then what about it (``cuda.init:802``).
_SYMPTOM_RE = re.compile(r"^[a-z0-9_.]+(?::[a-z0-9_.-]+)+$")

CheckResult = Finding | Iterable[Finding] | None
CheckFunc = Callable[[Facts], CheckResult]


@dataclass(frozen=True)
class CheckSpec:
    id: str
    title: str
    func: CheckFunc
    description: str = ""
    #: Facts it reads. If one of them timed out or crashed, the runner reports the check as
    #: ``error`` (it could not judge) unless ``judges_failures`` says the check handles that.
    needs: tuple[str, ...] = ()
    judges_failures: bool = False
    healthcheck: bool = False
    provider: str = "envdoctor"
    #: A microcheck: judges what the ``micro`` probe measured; run by ``--micro-only`` (and, with
    #: ``healthcheck``, by ``healthcheck --micro`` only).
    micro: bool = False
    #: Symptoms this check names the cause of and fails on (``"cuda.init:802"``); a check that
    #: meets one defers to it through :func:`owner_of` instead of failing a second time.
    owns: tuple[str, ...] = ()

    def __call__(self, facts: Facts) -> CheckResult:
        return self.func(facts)


def check(
    id: str,
    title: str,
    description: str = "",
    needs: Iterable[str] = (),
    healthcheck: bool = False,
    judges_failures: bool = False,
    micro: bool = False,
    owns: Iterable[str] = (),
) -> Callable[[CheckFunc], CheckSpec]:
    """Decorator turning ``func(facts) -> Finding | [Finding] | None`` into a CheckSpec."""
    if not _ID_RE.match(id):
        raise RegistryError(f"check id {id!r} is not kebab-case")
    needs, owns = tuple(needs), tuple(owns)
    validate_fact_keys(needs, f"check {id!r} needs=")
    _validate_symptoms(id, owns)

    def wrap(func: CheckFunc) -> CheckSpec:
        return CheckSpec(id, title, func, description or (func.__doc__ or "").strip(), needs,
                         judges_failures, healthcheck, micro=micro, owns=owns)

    return wrap


@dataclass
class Registry:
    checks: dict[str, CheckSpec] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, spec: CheckSpec, provider: str | None = None) -> None:
        if not isinstance(spec, CheckSpec):
            raise RegistryError(f"{spec!r} is not a CheckSpec (use @envdoctor.check)")
        if not _ID_RE.match(spec.id):
            raise RegistryError(f"check id {spec.id!r} is not kebab-case")
        validate_fact_keys(spec.needs, f"check {spec.id!r} needs=")
        _validate_symptoms(spec.id, spec.owns)
        if provider and provider != spec.provider:
            spec = dataclasses.replace(spec, provider=provider)
        if spec.id in self.checks:
            other = self.checks[spec.id]
            raise RegistryError(
                f"duplicate check id {spec.id!r}: provided by {other.provider} and by {spec.provider}")
        for symptom in spec.owns:
            if owner := next((c for c in self.checks.values() if symptom in c.owns), None):
                raise RegistryError(f"check {spec.id!r} ({spec.provider}) owns symptom {symptom!r}, which "
                                    f"{owner.id!r} ({owner.provider}) already owns")
        self.checks[spec.id] = spec

    def add_from(self, obj: Any, provider: str) -> int:
        specs = list(_specs_in(obj))
        for spec in specs:
            self.add(spec, provider)
        return len(specs)

    def __iter__(self) -> Iterator[CheckSpec]:
        return iter(self.checks.values())

    def __len__(self) -> int:
        return len(self.checks)


def _validate_symptoms(check_id: str, owns: tuple[str, ...]) -> None:
    for symptom in owns:
        if not isinstance(symptom, str) or not _SYMPTOM_RE.match(symptom):
            raise RegistryError(f"check {check_id!r} owns={symptom!r}: a symptom is 'fact.key:what' "
                                "(e.g. 'cuda.init:802')")


def _add_builtins(reg: Registry, modules: Iterable[str] | None = None) -> None:
    from . import checks as _builtin_checks

    wanted = None if modules is None else set(modules)
    for module_name in _builtin_checks.BUILTIN:
        if wanted is None or module_name in wanted:
            reg.add_from(importlib.import_module(f"envdoctor.checks.{module_name}"), "envdoctor")


@functools.lru_cache(maxsize=1)
def _builtin_owners() -> Mapping[str, str]:
    reg = Registry()
    _add_builtins(reg)
    return {symptom: spec.id for spec in reg for symptom in spec.owns}


def owner_of(symptom: str) -> str | None:
    """The id of the built-in check that owns ``symptom`` (see :attr:`CheckSpec.owns`), or None.
    Checks call this at judging time, so they never name each other."""
    return _builtin_owners().get(symptom)


def _specs_in(obj: Any) -> Iterable[CheckSpec]:
    if isinstance(obj, CheckSpec):
        yield obj
    elif isinstance(obj, ModuleType):
        listed = getattr(obj, "CHECKS", None)
        if listed is not None:
            yield from listed
        else:
            seen: set[int] = set()
            for value in vars(obj).values():
                if isinstance(value, CheckSpec) and id(value) not in seen:
                    seen.add(id(value))
                    yield value
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _specs_in(item)
    else:
        raise RegistryError(f"{obj!r} is neither a module, a CheckSpec nor a list of them")


def _entry_points() -> list[Any]:
    if not _plugins_possible():
        return []
    from importlib.metadata import entry_points

    return list(entry_points(group=ENTRY_POINT_GROUP))


def _plugins_possible() -> bool:
    """False only when no distribution importlib.metadata could find declares our entry-point group:
    every ``sys.path`` entry is a plain folder (or absent), and no ``*.dist-info`` / ``*.egg-info``
    folder in them has an ``entry_points.txt`` that mentions the group. Then importlib.metadata
    (~25 ms with the email package it imports, on every command) is not imported at all. Anything
    this cheap scan cannot read the same way (a zip or egg on sys.path, an importer of another
    kind that finds distributions) answers True, and importlib.metadata decides."""
    import importlib.machinery
    import os
    import sys

    if any(hasattr(f, "find_distributions") and f is not importlib.machinery.PathFinder for f in sys.meta_path):
        return True
    for entry in sys.path:
        folder = entry or "."
        if folder.lower().endswith(".egg") or os.path.isfile(folder):
            return True
        try:
            names = [e.name for e in os.scandir(folder) if e.name.lower().endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue  # absent or unreadable: importlib.metadata finds nothing there either
        for name in names:
            try:
                with open(os.path.join(folder, name, "entry_points.txt"), "rb") as fh:
                    if ENTRY_POINT_GROUP.encode() in fh.read():
                        return True
            except OSError:
                continue  # no entry points (or an egg-info file): nothing for the group
    return False


def load_registry(environ: Mapping[str, str] | None = None, plugins: bool = True,
                  builtin: Iterable[str] | None = None) -> Registry:
    """Built-ins first, then plugins. Raises RegistryError on duplicate ids. ``builtin`` names the
    built-in check modules to load (default: all of them): the healthcheck loads only its own."""
    import os

    env = os.environ if environ is None else environ
    reg = Registry()
    _add_builtins(reg, builtin)
    if not plugins or env.get(AUTOLOAD_ENV, "").strip().lower() in ("1", "true", "yes"):
        return reg
    for ep in _entry_points():
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.value.split(":")[0]
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not stop the run
            reg.warnings.append(f"plugin {ep.name!r} ({dist}) failed to load: {type(exc).__name__}: {exc}")
            continue
        try:
            reg.add_from(obj, dist)
        except RegistryError as exc:
            if "duplicate" in str(exc):
                raise
            reg.warnings.append(f"plugin {ep.name!r} ({dist}): {exc}")
    return reg
