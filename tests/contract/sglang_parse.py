"""Parse command lines with SGLang's own parser (run by the contract venv's Python, not pytest's).

    python sglang_parse.py < [["--model-path", "/m", ...], ...]
    -> {"version": "0.5.23", "results": [{"ok": true, "fields": {...}}, {"ok": false, "error": "..."}]}
    python sglang_parse.py < {"argvs": [...], "startup": true, "choices": ["--reasoning-parser", ...]}
    -> the same, each argv also through SGLang's start-up checks (below), plus "choices": the
       parser's choices of each named flag

Each argv goes through ``sglang.srt.server_args.prepare_server_args`` - what ``python -m
sglang.launch_server`` calls: ``--config`` merging, argparse, then ``ServerArgs.from_cli_args``.
argparse's rejection (SystemExit) is reported with the message it printed. Fields: a fixed
subset, or every field with SGLANG_PARSE_ALL_FIELDS=1 (the takeover reader's contract test).
Runs on a CPU-only machine with SGLang installed ``--no-deps`` beside CPU torch: triton is
replaced by SGLang's own stub (``sglang/_platform_stubs.py``, which SGLang itself installs only on
Apple silicon).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from bench.sglang_stubs import install_triton_stub, stub_module  # noqa: E402


# Fields the GPU- and model-dependent resolution hooks would have set before check_server_args
# reads them: chunked_prefill_size (memory_hook.py handle_gpu_memory_settings, from the GPU's
# memory), page_size (the attention backend's default, 1 on CUDA).
RESOLVED_ON_A_GPU = {"chunked_prefill_size": 8192, "page_size": 1}


def startup_checks(args):
    """SGLang's start-up validation that runs before the model loads and needs neither a GPU nor
    the model, called as SGLang calls it:
    - spec_info.py SpeculativeAlgorithm.from_string: the name check of speculative_hook.py
      handle_speculative_decoding / _resolve_speculative_algorithm_alias (upper-cases the name;
      "Unknown speculative algorithm name");
    - validation_hook.py check_server_args (Engine._launch_subprocesses calls it right after
      resolve_once): tp_size divisible by nnodes, served_model_name without ':', and the rest.
      served_model_name first gets serving_hook.py handle_missing_default_values's default (the
      model path), and RESOLVED_ON_A_GPU stands in for the hooks that need a GPU.
    Not run: the rest of resolve_once (arg_groups/pipeline.py run_resolution_pipeline) reads the
    model's config.json and the platform (speculative auto-parameters and their bare
    AssertionError / TypeError in speculative_hook.py, mamba_hook.py's architecture and track
    interval checks): the profile filter's own rules stand for those, tested in test_filter.py."""
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    if args.speculative_algorithm is not None:  # upper-cased first, as the hook does
        SpeculativeAlgorithm.from_string(args.speculative_algorithm.upper())
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    for key, value in RESOLVED_ON_A_GPU.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    args.check_server_args()


def choices(flags):
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return {flag: list(a.choices) for a in parser._actions for flag in flags
            if flag in a.option_strings and a.choices is not None}


def parse(argv, startup=False):
    from sglang.srt.server_args import prepare_server_args

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = prepare_server_args(list(argv))
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "error": lines[-1] if lines else "argparse exit %s" % e.code}
    except Exception as e:  # SGLang's own checks at construction
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    if startup:
        try:
            startup_checks(args)
        except Exception as e:
            return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    fields = {}
    for key in (all_fields(args) if os.environ.get("SGLANG_PARSE_ALL_FIELDS") else
                ("speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
                 "speculative_eagle_topk", "speculative_draft_model_path", "speculative_adaptive",
                 "tp_size", "api_key", "port", "context_length",
                 "nnodes", "node_rank", "dist_init_addr")):
        value = getattr(args, key, None)
        fields[key] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    return {"ok": True, "fields": fields}


def all_fields(args):
    """Every field of ServerArgs (a msgspec.Struct in 0.5.23, a dataclass in older releases)."""
    names = list(getattr(type(args), "__struct_fields__", ()))
    if not names:
        dataclass = dataclasses.is_dataclass(args)
        names = [f.name for f in dataclasses.fields(args)] if dataclass else list(vars(args))
    return names


def main():
    request = json.load(sys.stdin)
    if isinstance(request, list):
        request = {"argvs": request}
    stubs = install_triton_stub()
    for name in filter(None, os.environ.get("SGLANG_PARSE_STUB_MODULES", "").split(",")):
        stub_module(name, stubs)
    import sglang

    out = {"version": getattr(sglang, "__version__", None),
           "results": [parse(a, request.get("startup", False)) for a in request["argvs"]],
           "choices": choices(request.get("choices", []))}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
