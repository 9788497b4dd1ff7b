"""The cross-check's steps that run under the contract venv's Python (scripts/contract-venv.sh:
SGLang --no-deps, CPU torch, transformers, tokenizers; the repo venv has none of them).

    CONTRACT_PYTHON -m bench.crosscheck_contract tokenizer OUT_DIR --corpus FILE [--vocab-size 2000]
    CONTRACT_PYTHON -m bench.crosscheck_contract serving -- ARGS...

Run from the repository root (bench/crosscheck.py does: its cwd), which ``-m`` puts on the path
for ``bench.sglang_stubs``; the contract venv has nothing of the repository installed.

``serving`` runs ``python -m sglang.benchmark.serving ARGS...`` (the module's own ``__main__``, via
runpy) after stand-ins for what the --no-deps install lacks and the benchmark never uses on this
path: ``sglang.srt.disaggregation.utils`` (serving.py takes one constant from it, but importing it
reaches torchvision through sglang.srt.configs) becomes a module holding that constant, read
from SGLang's source; triton (imported by ``sglang.srt.utils.common``, which
``sglang.srt.utils.network`` drags in) is SGLang's own stub (``sglang/_platform_stubs.py``, which
SGLang installs itself only on Apple silicon); Hugging Face ``datasets`` (imported at module level
by ``sglang/benchmark/datasets/mmmu.py`` for the MMMU dataset only) is a module whose
``load_dataset`` raises. Everything the measurement runs - request functions, dataset sampling,
metrics - is SGLang's unmodified code.

``tokenizer`` makes a small Hugging Face tokenizer directory without any download. It trains a
byte-level BPE on the texts of FILE (a JSON list: the repo's coding prompts and a long-context
prompt, which bench/crosscheck.py writes from the engine's prompt set, sglang_perf.measure.prompts)
and writes OUT_DIR/tokenizer.json, tokenizer_config.json (with a ChatML chat template, so
``sglang.benchmark.serving``'s check_chat_template() is satisfied) and config.json carrying the
architecture the emulator reads from ``--model-path`` (Qwen3_5ForConditionalGeneration, as the
real model's). Then it loads the directory back with ``transformers.AutoTokenizer`` and prints one
JSON line: {"dir", "vocab_size", "len", "roundtrip"}.

Byte-level: every string encodes (no unknown token) and ``decode`` of arbitrary ids gives text,
which is what ``--dataset-name random-ids`` does with this tokenizer.
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version
from pathlib import Path

ARCHITECTURE = "Qwen3_5ForConditionalGeneration"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def make(out_dir, texts, vocab_size=2000):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    # The emulator reads "architectures" from <model-path>/config.json (emulator/args.py
    # read_architecture); no model_type: AutoTokenizer goes by tokenizer_class and never maps the
    # directory to a real model's tokenizer class.
    (out / "config.json").write_text(json.dumps({"architectures": [ARCHITECTURE]}, indent=2) + "\n")
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    cfg_path.write_text(json.dumps(cfg, indent=2) + "\n")

    loaded = AutoTokenizer.from_pretrained(str(out), trust_remote_code=True)
    sample = texts[0]
    ids = loaded.encode(sample, add_special_tokens=False)
    return {"dir": str(out), "sglang_version": version("sglang"), "class": type(loaded).__name__,
            "vocab_size": loaded.vocab_size, "len": len(loaded), "sample_tokens": len(ids),
            "roundtrip": loaded.decode(ids) == sample,
            # exactly sglang.benchmark.serving's check_chat_template()
            "chat_template": "chat_template" in loaded.init_kwargs}


def install_stubs():
    """triton -> SGLang's own stub (as on Apple silicon); datasets -> a module that refuses."""
    import importlib.util
    import types

    if importlib.util.find_spec("datasets") is None and "datasets" not in sys.modules:
        mod = types.ModuleType("datasets")

        def load_dataset(*args, **kwargs):
            raise RuntimeError("Hugging Face 'datasets' is not installed in the contract venv "
                               "(the cross-check uses --dataset-name random-ids only)")
        mod.load_dataset = load_dataset
        sys.modules["datasets"] = mod
    if importlib.util.find_spec("triton") is None:
        from bench.sglang_stubs import install_triton_stub

        install_triton_stub()


def stub_disaggregation_utils():
    """``sglang.benchmark.serving`` imports one constant, FAKE_BOOTSTRAP_HOST, from
    ``sglang.srt.disaggregation.utils``, whose own imports reach sglang.srt.configs and from there
    torchvision (never installed here: it pulls CUDA torch). Register a module holding just that
    constant, its value read from SGLang's own source."""
    import ast
    import importlib.util
    import types

    name = "sglang.srt.disaggregation.utils"
    root = Path(importlib.util.find_spec("sglang").origin).parent
    source = root / "srt" / "disaggregation" / "utils.py"
    value = None
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "FAKE_BOOTSTRAP_HOST"
                                                for t in node.targets):
            value = ast.literal_eval(node.value)
    if value is None:
        raise RuntimeError("FAKE_BOOTSTRAP_HOST not found in %s" % source)
    mod = types.ModuleType(name)
    mod.__file__ = str(source)
    mod.FAKE_BOOTSTRAP_HOST = value
    sys.modules[name] = mod


def serving(argv):
    import runpy

    install_stubs()
    stub_disaggregation_utils()
    sys.argv = ["python -m sglang.benchmark.serving"] + list(argv)
    runpy.run_module("sglang.benchmark.serving", run_name="__main__", alter_sys=True)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serving"]:
        rest = argv[1:]
        return serving(rest[1:] if rest[:1] == ["--"] else rest)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tokenizer", help="make the tokenizer directory")
    t.add_argument("out_dir")
    t.add_argument("--corpus", required=True, help="a JSON list of the texts to train on")
    t.add_argument("--vocab-size", type=int, default=2000)
    sub.add_parser("serving", help="python -m sglang.benchmark.serving ARGS (after the stubs)")
    args = p.parse_args(argv)
    print(json.dumps(make(args.out_dir, json.loads(Path(args.corpus).read_text()), args.vocab_size)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
