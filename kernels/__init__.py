"""Kernel families: templates, parameter spaces, transforms (the action space), constraints and
reference semantics. Pure: the standard library and Jinja2 only, no I/O beyond reading the
package's own templates, no GPU.

The registry: families built into this repository, families of installed packages that join
the ``tuneforge.families`` entry-point group (the entry point loads a family object, or a module
with a ``FAMILY``), families registered at run time (:func:`register_family`), and families
that a resolver finds by name (:func:`add_resolver`: a team's own families, which live in a
database that ``kernels`` never reads itself).
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from kernels.family import KernelFamily

#: Entry-point group an installed package joins to add families.
ENTRY_POINT_GROUP = "tuneforge.families"

#: Families of this repository: name -> the module whose ``FAMILY`` it is.
BUILTIN: dict[str, str] = {
    "gemm_bias_relu": "kernels.gemm_bias_relu",
    "softmax": "kernels.softmax",
}

_loaded: dict[str, KernelFamily] = {}
#: what the resolvers found, the most recently used last (at most :data:`MAX_RESOLVED`)
_found: OrderedDict[str, KernelFamily] = OrderedDict()
#: resolved families a process keeps (a long-lived worker meets many versions of a team's)
MAX_RESOLVED = 64
_registered: dict[str, KernelFamily] = {}
#: Asked in order for a name nothing else knows (:func:`add_resolver`).
_resolvers: list[Callable[[str], Any]] = []


def _as_family(obj: Any, where: str) -> KernelFamily:
    family = getattr(obj, "FAMILY", obj)
    if not isinstance(family, KernelFamily):
        wanted = {*KernelFamily.__annotations__,
                  *(n for n in vars(KernelFamily) if not n.startswith("_"))}
        missing = [name for name in wanted if not hasattr(family, name)]
        raise TypeError(f"{where} is not a kernel family (missing: {', '.join(sorted(missing))})")
    return family


def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def family_names() -> list[str]:
    """Every family that can be had: built in, installed plug-ins, registered at run time."""
    names = [*BUILTIN, *(n for n in _plugins() if n not in BUILTIN)]
    return names + [n for n in _registered if n not in names]


def register_family(family: Any, *, replace: bool = False) -> KernelFamily:
    """Add a family object at run time (a test's, a team's); ``ValueError`` if the name is
    taken and ``replace`` is not set."""
    checked = _as_family(family, f"{family!r}")
    name = checked.name
    if not replace and (name in _registered or name in BUILTIN or name in _plugins()):
        raise ValueError(f"kernel family {name!r} is already registered")
    _registered[name] = checked
    return checked


def unregister_family(name: str) -> None:
    """Drop a family registered at run time (nothing if there is none)."""
    _registered.pop(name, None)


def add_resolver(resolver: Callable[[str], Any]) -> None:
    """Ask ``resolver(name) -> family | None`` for a name that is neither built in, nor a
    plug-in, nor registered. What it finds is kept, the :data:`MAX_RESOLVED` most recently
    used names a process, so a name is asked again only once it has dropped out. The same
    callable added twice is asked once."""
    if resolver not in _resolvers:
        _resolvers.append(resolver)


def remove_resolver(resolver: Callable[[str], Any]) -> None:
    """Stop asking ``resolver`` (nothing if it was not added)."""
    if resolver in _resolvers:
        _resolvers.remove(resolver)


def _resolved(name: str) -> KernelFamily | None:
    for resolver in list(_resolvers):
        found = resolver(name)
        if found is not None:
            return _as_family(found, f"the family {resolver!r} found for {name!r}")
    return None


def get_family(name: str) -> KernelFamily:
    """The family called ``name``; ``ValueError`` names the known ones."""
    if name in _registered:
        return _registered[name]
    if name in _loaded:
        return _loaded[name]
    if name in _found:
        _found.move_to_end(name)
        return _found[name]
    plugin = None if name in BUILTIN else _plugins().get(name)
    if name in BUILTIN:
        family = _as_family(importlib.import_module(BUILTIN[name]), BUILTIN[name])
    elif plugin is not None:
        family = _as_family(plugin.load(), f"entry point {plugin.value}")
    else:
        found = _resolved(name)
        if found is None:
            raise ValueError(f"unknown kernel family {name!r}; known: "
                             f"{', '.join(family_names())}")
        family = found
    if family.name != name:
        raise TypeError(f"family registered as {name!r} calls itself {family.name!r}")
    if name in BUILTIN or plugin is not None:
        _loaded[name] = family
    else:  # a resolver's: kept among the most recent
        _found[name] = family
        while len(_found) > MAX_RESOLVED:
            _found.popitem(last=False)
    return family
