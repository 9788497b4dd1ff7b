"""Parse command lines with SGLang's own parser (run by the contract venv's Python, not pytest's).

    python sglang_parse.py < [["--model-path", "/m", ...], ...]
    -> {"version": "0.5.23", "results": [{"ok": true, "fields": {...}}, {"ok": false, "error": "..."}]}

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


def parse(argv):
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
    fields = {}
    for key in (all_fields(args) if os.environ.get("SGLANG_PARSE_ALL_FIELDS") else
                ("speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
                 "speculative_eagle_topk", "tp_size", "api_key", "port", "context_length",
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
    argvs = json.load(sys.stdin)
    stubs = install_triton_stub()
    for name in filter(None, os.environ.get("SGLANG_PARSE_STUB_MODULES", "").split(",")):
        stub_module(name, stubs)
    import sglang

    out = {"version": getattr(sglang, "__version__", None), "results": [parse(a) for a in argvs]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
