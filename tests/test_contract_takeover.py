"""Contract tier: the takeover's reading of a hand-made command line (plugins/filter/
sglang_profile.py sglang_command_profile, the flag table read backwards) against SGLang's own
parser: every setting we read is the value SGLang runs with (after its own normalisation)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import ROOT
from sglang_perf.plan import profile as flt
from test_contract import DEFAULTS, PROFILES, VERSION, contract  # noqa: F401  (the fixture)

pytestmark = pytest.mark.contract

MODEL = ["--model-path", "/srv/models/Qwen3.6-27B", "--served-model-name", "Qwen3.6-27B"]
# The original hand launch, as a unit would hold it, and the spellings an operator may use.
HAND = MODEL + ["--tp-size", "2", "--trust-remote-code", "--speculative-algorithm", "NEXTN",
                "--speculative-num-steps", "1", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "2", "--mamba-radix-cache-strategy", "extra_buffer",
                "--reasoning-parser", "qwen3", "--tool-call-parser", "qwen3_coder",
                "--host", "0.0.0.0", "--port", "30000"]
SPELLINGS = ["--model=/srv/models/Qwen3.6-27B", "--tensor-parallel-size", "2", "--mem-fraction-static=0.8",
             "--context-length", "65536", "--max-running-requests", "4", "--speculative-algorithm", "nextn",
             "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
             "--speculative-num-draft-tokens", "4", "--mamba-full-memory-ratio", "0.5"]


def sglang_fields(contract, argvs):  # noqa: F811  (contract: the fixture)
    python, _, _ = contract
    p = subprocess.run([python, str(ROOT / "tests/contract/sglang_parse.py")], input=json.dumps(argvs),
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH="", SGLANG_PARSE_ALL_FIELDS="1"))
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == VERSION, out["version"]
    return out["results"]


def field_of(setting, version):
    return flt.flag_for(setting, version).lstrip("-").replace("-", "_")


def test_what_we_read_is_what_sglang_runs_with(contract):  # noqa: F811
    argvs = {"hand": HAND, "spellings": SPELLINGS}
    argvs.update({"profile " + p: MODEL + flt.sglang_argv(DEFAULTS["sglang_profiles"][p], VERSION)
                  for p in PROFILES})
    names = sorted(argvs)
    results = dict(zip(names, sglang_fields(contract, [argvs[n] for n in names])))
    for name in names:
        r = results[name]
        assert r["ok"], "%s: SGLang refuses %s: %s" % (name, argvs[name], r["error"])
        read = flt.sglang_command_profile({"engine": "sglang", "argv": argvs[name], "args_from": 0},
                                          VERSION)
        assert read["unknown"] == [], (name, read["unknown"])
        assert read["profile"], name
        for setting, value in read["profile"].items():
            got = r["fields"][field_of(setting, VERSION)]
            if setting == "speculative_algorithm":
                # SGLang keeps the spelling given and upper-cases it when it resolves the
                # algorithm (SpeculativeAlgorithm.from_string); /server_info reports NEXTN as EAGLE
                got, value = got.upper(), value.upper()
            assert got == value, "%s: %s read as %r, SGLang runs with %r" % (name, setting, value, got)
        for setting, value in read["server"].items():
            got = r["fields"][setting]
            assert str(got) == str(value) or got is value, "%s: %s %r vs %r" % (name, setting, value, got)
