# -*- coding: utf-8 -*-
"""Which model server a command line launches: the one recognition of SGLang and vLLM command
lines (the sglang_units and sglang_processes modules use it). Standard library only."""
from __future__ import annotations

ENGINE_MODULES = {"sglang.launch_server": "sglang", "vllm.entrypoints.openai.api_server": "vllm",
                  "vllm.entrypoints.cli.main": "vllm"}
ENGINE_SCRIPTS = {("sglang", "serve"): "sglang", ("vllm", "serve"): "vllm"}


def engine_of(argv, launch_modules=None):
    """(engine, index of the engine's first argument) of a command line, or (None, None):
    ``python -m sglang.launch_server``, ``sglang serve``, ``vllm serve``, ``python -m
    vllm.entrypoints.openai.api_server``, ``python -m vllm.entrypoints.cli.main serve``, or
    ``python -m <module>`` of ``launch_modules`` ({module: engine}: the modules the managed unit
    runs, sglang_launch_modules inverted)."""
    for i, word in enumerate(argv):
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if word == "-m" and nxt:
            engine = (launch_modules or {}).get(nxt) or ENGINE_MODULES.get(nxt)
            if engine:
                start = i + 2
                # `python -m vllm.entrypoints.cli.main serve MODEL`: the arguments follow `serve`
                if engine == "vllm" and argv[start:start + 1] == ["serve"]:
                    start += 1
                return engine, start
        engine = ENGINE_SCRIPTS.get((word.rsplit("/", 1)[-1], nxt))
        if engine:
            return engine, i + 2
    return None, None
