# -*- coding: utf-8 -*-
"""The engines the roles deploy and the bench measures, one module each (sglang.py, vllm.py):
everything engine-specific lives there, and one record per setting in settings.py. Code outside
this package asks the engine object (``get(kind).ready_paths``, ``.render(...)``) and never
branches on an engine's name. Standard library only."""
from __future__ import annotations

from . import sglang, vllm
from .settings import ProfileError

_ENGINES = {m.name: m for m in (sglang, vllm)}
DEFAULT = sglang.name  # a host's engine when sglang_engine leaves it unset


def names():
    """The engines' names, the default first."""
    return tuple(_ENGINES)


def get(name):
    """The engine module called ``name``; ProfileError names the known ones otherwise."""
    if name not in _ENGINES:
        raise ProfileError("engine %r is not one of %s" % (name, ", ".join(_ENGINES)))
    return _ENGINES[name]


def find(name, default=None):
    """The engine called ``name``, else ``default`` (an unknown server kind, a missing key)."""
    return _ENGINES.get(name, default)


def every():
    """The engine modules, the default first."""
    return tuple(_ENGINES.values())


def launchers():
    """{module run with `python -m`: engine name} over every engine."""
    return {module: e.name for e in every() for module in e.launch_modules}


def of_scrape(scrape):
    """The engine whose counters a /metrics scrape holds, or None."""
    for e in every():
        if e.counters["generation_tokens"] in (scrape or {}):
            return e
    return None
