"""Resolve SGLang command lines as a CUDA host would, up to the model load (run by the contract
venv's Python, not pytest's).

    python sglang_resolve.py < {"argvs": [["--model-path", "/m", ...], ...]}
    -> {"version": "0.5.23",
        "results": [{"ok": true, "fields": {...}, "warnings": ["logger: message", ...]},
                    {"ok": false, "stage": "resolve", "error": "ValueError: ...", "warnings": [...]}]}

Each argv goes through what `python -m sglang.launch_server` runs before a model loads:
``prepare_server_args`` (sglang_parse.py's path: ``--config``, argparse, ``ServerArgs``), then
``ServerArgs.resolve_once``, the whole resolution pipeline Engine runs once per server
(arg_groups/pipeline.py ``run_resolution_pipeline``; its ``handle_speculative_decoding``
upper-cases the algorithm, aliases NEXTN to EAGLE, reads the drafter's config.json, and hands
over to ``_handle_dflash`` / ``_handle_eagle_family``, after ``_maybe_disable_adaptive`` and
``_init_adaptive_speculative_params``). "fields": the resolved values
(``overrides.resolution_result``: the last declaration over the raw input); "warnings": what
SGLang's loggers said at WARNING or above while resolving (an override it makes with a warning
only shows here).

Stand-ins, for what a CPU machine lacks:
- the target model: ``model_path`` becomes a directory holding Qwen3.6-27B's text config
  (vllm_parse.py ``stand_in``, the one the vLLM contract uses); the drafters are the test's own
  stand-in directories, named in the argv as the repo renders them;
- the machine: SGLang's own ``runtime_context.override_platform`` says CUDA at compute capability
  8.6 (the RTX A6000 the profiles are tuned on) with flashinfer installed, and ``device`` is
  "cuda", what ``get_device()`` answers there (serving_hook.py handle_missing_default_values);
- triton is SGLang's own stub and torchvision a mock module (bench/sglang_stubs.py), as in
  sglang_parse.py; resolution imports the model config classes, which import torchvision.
Not run: what follows resolution (Engine's scheduler and workers, the weights, CUDA graphs; the
DFLASH worker's "block size mismatch" warning of dflash_worker_v2.py is logged there).
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from bench.sglang_stubs import install_triton_stub, stub_module  # noqa: E402
from vllm_parse import stand_in  # noqa: E402

# The resolved fields reported (the speculative ones, and the settings they touch).
FIELDS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
          "speculative_num_draft_tokens", "speculative_draft_model_path", "speculative_adaptive",
          "speculative_draft_attention_backend", "max_running_requests", "device", "tp_size",
          "mamba_radix_cache_strategy", "mamba_scheduler_strategy")
# A CUDA host at compute capability 8.6 (RTX A6000), flashinfer installed: every platform fact
# a release knows (runtime_context.py _PLATFORM_PROBES / _PLATFORM_VALUES) is said, none probed.
CUDA_SM86 = {"is_cuda": True, "device_sm": 86, "device_capability": (8, 6), "has_flashinfer": True}


class Capture(logging.Handler):
    """SGLang's log records at WARNING or above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        if record.name.startswith("sglang"):
            self.lines.append("%s: %s" % (record.name, record.getMessage()))


def platform_facts():
    from sglang.srt import runtime_context as rc

    known = set(rc._PLATFORM_PROBES) | set(rc._PLATFORM_VALUES)
    facts = {name: False for name in rc._PLATFORM_PROBES}
    facts.update(CUDA_SM86)
    return {k: v for k, v in facts.items() if k in known}


def resolve(argv, model):
    from sglang.srt.arg_groups.overrides import resolution_result
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import prepare_server_args

    capture, environ = Capture(), dict(os.environ)
    err = io.StringIO()
    stage = "argparse"
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = prepare_server_args(list(argv))
            # after prepare_server_args: its logging.basicConfig(force=True) resets the root's handlers
            logging.getLogger().addHandler(capture)
            stage = "resolve"
            args.model_path = model
            if args.device is None:
                args.device = "cuda"
            with override_platform(**platform_facts()):
                args.resolve_once()
    except SystemExit as e:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        return {"ok": False, "stage": stage, "error": lines[-1] if lines else "argparse exit %s" % e.code,
                "warnings": capture.lines}
    except Exception as e:
        return {"ok": False, "stage": stage, "error": "%s: %s" % (type(e).__name__, e),
                "warnings": capture.lines}
    finally:
        logging.getLogger().removeHandler(capture)
        # resolution exports settings to the environment (serving_hook.py
        # handle_environment_variables): the next argv starts from this process's own
        os.environ.clear()
        os.environ.update(environ)
    fields = {}
    for key in FIELDS:
        value = resolution_result(args, key) if hasattr(args, key) else None
        fields[key] = value if value is None or isinstance(value, (int, float, str, bool)) else str(value)
    return {"ok": True, "fields": fields, "warnings": capture.lines}


def without_image_processor_registry():
    """Releases whose transformers keeps AutoImageProcessor behind torchvision (0.5.19 pins
    transformers 5.12.1, whose AutoImageProcessor is a placeholder raising ImportError) fail
    importing SGLang's model configs, which register their image processors with it at import
    (configs/utils.py register_image_processor): there a stand-in takes the registrations and
    drops them. Text-only resolution never asks for an image processor."""
    import transformers

    try:
        transformers.AutoImageProcessor.register  # noqa: B018 (the placeholder raises here)
        return
    except ImportError:
        pass

    class AutoImageProcessor:
        @classmethod
        def register(cls, *args, **kwargs):
            pass

    transformers.AutoImageProcessor = AutoImageProcessor


def main():
    request = json.load(sys.stdin)
    stubs = install_triton_stub()
    stub_module("torchvision", stubs)
    import sglang

    without_image_processor_registry()

    with tempfile.TemporaryDirectory(prefix="sglang-resolve-") as workdir:
        model = os.path.join(workdir, "Qwen3.6-27B")
        os.makedirs(model)
        stand_in(model)
        out = {"version": getattr(sglang, "__version__", None),
               "results": [resolve(a, model) for a in request["argvs"]]}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
