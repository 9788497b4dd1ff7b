"""Parse command lines with SGLang's own parser (run by the contract venv's Python, not pytest's).

    python sglang_parse.py < [["--model-path", "/m", ...], ...]
    -> {"version": "0.5.23", "results": [{"ok": true, "fields": {...}}, {"ok": false, "error": "..."}]}

Each argv goes through ``sglang.srt.server_args.prepare_server_args`` - what ``python -m
sglang.launch_server`` calls: ``--config`` merging, argparse, then ``ServerArgs.from_cli_args``.
argparse's rejection (SystemExit) is reported with the message it printed. Runs on a CPU-only
machine with SGLang installed ``--no-deps`` beside CPU torch: triton is replaced by SGLang's own
stub (``sglang/_platform_stubs.py``, which SGLang itself installs only on Apple silicon).
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import platform
import sys


def install_triton_stub():
    """Run SGLang's install_platform_stubs() as on Apple silicon (its triton part is what a CPU
    machine lacks), without importing the sglang package first (that imports triton)."""
    # Releases before 0.5.2x do not ship the stub: take the newest one on the path (the venv's).
    candidates = [os.path.join(p, "sglang", "_platform_stubs.py") for p in sys.path if p]
    path = [c for c in candidates if os.path.exists(c)][-1]
    stubs_spec = importlib.util.spec_from_file_location("sglang_platform_stubs", path)
    stubs = importlib.util.module_from_spec(stubs_spec)
    sys.modules[stubs_spec.name] = stubs  # its dataclasses look themselves up there
    stubs_spec.loader.exec_module(stubs)
    import torch

    saved = sys.platform, platform.machine, torch.backends.mps.is_available, stubs._patch_non_blocking
    sys.platform, platform.machine = "darwin", (lambda: "arm64")
    torch.backends.mps.is_available = lambda: True
    stubs._patch_non_blocking = lambda: None  # MPS-only tensor patches: not wanted here
    try:
        stubs.install_platform_stubs()
    finally:
        sys.platform, platform.machine, torch.backends.mps.is_available, stubs._patch_non_blocking = saved
    return stubs


def stub_module(name, stubs):
    """``name`` (and its submodules) as SGLang's mock modules. Older releases import torchvision
    at module level (0.5.13: sglang/srt/utils/common.py `from torchvision.io import decode_jpeg`),
    which parsing never calls; torchvision from PyPI would pull CUDA torch."""
    import importlib.abc
    import importlib.machinery

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            return stubs._MockModule(spec.name)

        def exec_module(self, module):
            pass

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname == name or fullname.startswith(name + "."):
                return importlib.machinery.ModuleSpec(fullname, Loader(), is_package=True)
            return None

    if name == "torchvision":
        # transformers caches whether torchvision is installed (lru_cache): ask before the stub
        # exists, so transformers keeps to its no-torchvision paths.
        from transformers.utils import import_utils

        import_utils.is_torchvision_available()
        import_utils.is_torchvision_v2_available()
    sys.meta_path.insert(0, Finder())


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
    for key in ("speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
                "speculative_eagle_topk", "tp_size", "api_key", "port", "context_length"):
        value = getattr(args, key, None)
        fields[key] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    return {"ok": True, "fields": fields}


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
