"""SGLang on a CPU machine, for the contract tier (run by the contract venv's Python): SGLang's own
triton stub (``sglang/_platform_stubs.py``, which SGLang installs only on Apple silicon) and mock
modules for what older releases import at module level but parsing never calls. Used by
tests/contract/sglang_parse.py (the argument parser) and bench/crosscheck_contract.py
(sglang.benchmark.serving)."""
from __future__ import annotations

import importlib.util
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
