# -*- coding: utf-8 -*-
"""Which model server a command line launches: the one recognition of engine command lines (the
sglang_units and sglang_processes modules use it), from each engine's launch modules and scripts
(engines/<engine>.py). Standard library only."""
from __future__ import annotations

from .. import engines

ENGINE_MODULES = engines.launchers()
# Each engine's main launch module (the sglang_processes module's default launch_modules).
MAIN_MODULES = {e.launch_modules[0]: e.name for e in engines.every()}


def engine_of(argv, launch_modules=None):
    """(engine, index of the engine's first argument) of a command line, or (None, None):
    ``python -m <module>`` of an engine's launch modules (``python -m sglang.launch_server``,
    ``python -m vllm.entrypoints.cli.main serve``) or of ``launch_modules`` ({module: engine}:
    the modules the managed unit runs, sglang_launch_modules inverted), or ``<script> serve``
    (``sglang serve``, ``vllm serve``)."""
    for i, word in enumerate(argv):
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if word == "-m" and nxt:
            eng = engines.find((launch_modules or {}).get(nxt) or ENGINE_MODULES.get(nxt))
            if eng:
                start = i + 2
                # `python -m vllm.entrypoints.cli.main serve MODEL`: the arguments follow `serve`
                after = list(eng.script_args_after)
                if after and argv[start:start + len(after)] == after:
                    start += len(after)
                return eng.name, start
        for eng in engines.every():
            if word.rsplit("/", 1)[-1] in eng.scripts and nxt == "serve":
                return eng.name, i + 2
    return None, None
