"""The registry: one line per system, name -> the module holding its `SYSTEM` record (audit.contracts.System).

Modules load on first use, so importing the registry costs nothing. Packages outside this repository add
systems through the `replaudit.systems` entry-point group (name = the system, value = "module:SYSTEM"), and a
test may `register()` one for the length of a run."""
from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from typing import Iterable

from audit.contracts import System

BUILTIN = {
    "bookkeeper": "audit.systems.bookkeeper.system",
    "pulsar": "audit.systems.pulsar.system",
    "kafka": "audit.systems.kafka.system",
}
ENTRY_POINT_GROUP = "replaudit.systems"
_loaded: dict[str, System] = {}
_extra: dict[str, System] = {}


def register(system: System) -> None:
    """Add (or replace) a system outside the built-in ones; `unregister` removes it."""
    _extra[system.name] = system


def unregister(name: str) -> None:
    _extra.pop(name, None)


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def names() -> list[str]:
    """Every known system, built-in first, in registry order."""
    out = list(BUILTIN)
    out += [n for n in _plugins() if n not in out]
    out += [n for n in _extra if n not in out]
    return out


def get(name: str) -> System:
    if name in _extra:
        return _extra[name]
    if name not in _loaded:
        where = BUILTIN.get(name) or _plugins().get(name)
        if where is None:
            raise KeyError(f"no system {name!r} (known: {', '.join(names())})")
        module, _, attr = where.partition(":")
        system = getattr(importlib.import_module(module), attr or "SYSTEM")
        if not isinstance(system, System) or system.name != name:
            raise TypeError(f"{where}: expected a System named {name!r}")
        _loaded[name] = system
    return _loaded[name]


def meaning(system: str | None, check: str) -> str:
    """The one-line meaning of a finding's check, from its system's checks table; "" when either is unknown
    (a report or an alert still goes out for a finding of a system no longer installed)."""
    try:
        found = get(system).checks.get(check)
    except KeyError:
        return ""
    return found.meaning if found else ""


def all_systems() -> list[System]:
    return [get(n) for n in names()]


def declared(estate) -> list[System]:
    """The systems the estate has clusters of, in registry order."""
    return [get(n) for n in names() if estate.clusters(n)]


def of(names_: Iterable[str]) -> list[System]:
    return [get(n) for n in names_]
