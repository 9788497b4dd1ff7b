"""Contract tier, vLLM: our vLLM units and the vLLM emulator held against vLLM 0.33's own code.

vLLM is installed --no-deps in its own venv (scripts/contract-venv-vllm.sh, cached); the command
line runs there through what `vllm serve` runs before it loads a model (tests/contract/vllm_parse.py:
the serve parser, validate_parsed_serve_args, validate_api_server_args, AsyncEngineArgs.from_cli_args,
create_engine_config on vLLM's CPU platform with a stand-in for the model directory).
VLLM_VERSION=X (the version-bump drill) renders the units for release X and parses them with X's
code.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess

import pytest

from emulator.vllm import args as emu
from conftest import ROOT, role_defaults
from sglang_perf import engines
from sglang_perf.plan import profile as flt
from test_contract import DFLASH_CONFIG, EAGLE3_CONFIG, KEY, exec_argv, render_units, stand_in_drafters, \
    with_secrets_file

pytestmark = pytest.mark.contract

DEFAULTS = role_defaults()
VERSION = os.environ.get("VLLM_VERSION") or DEFAULTS["sglang_vllm_version"]
# every vLLM profile of the defaults (vllm_dflash's drafter: test_contract.py's stand-in), and the
# EAGLE-3 profile the docs show (test_contract.py EXTRA_PROFILES)
PROFILES = sorted(n for n, p in DEFAULTS["sglang_profiles"].items() if flt.profile_engine(p) == "vllm")
DRAFTERS = ("vllm_dflash", "vllm_eagle3")
VLLM = engines.get("vllm")
# rendered through render.yml in both inventories (a playbook run each); the other MTP depths
# differ from vllm_mtp_3 only in the steps, and are parsed from the filter's argv
RENDERED = ["vllm_mtp_3", "vllm_no_spec"]
MODEL = "/srv/models/Qwen3.6-27B"
SERVER = {"model_path": MODEL, "served_model_name": "Qwen3.6-27B", "host": "127.0.0.1", "port": 30000,
          "trust_remote_code": True, "enable_metrics": True}


@pytest.fixture(scope="module")
def vllm_python():
    p = subprocess.run([str(ROOT / "scripts/contract-venv-vllm.sh")], capture_output=True, text=True,
                       env=dict(os.environ, VLLM_VERSION=VERSION), timeout=3600)
    assert p.returncode == 0, "scripts/contract-venv-vllm.sh failed:\n" + p.stderr[-3000:]
    return dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)["VLLM_CONTRACT_PYTHON"]


def vllm_run(python, request):
    p = subprocess.run([python, str(ROOT / "tests/contract/vllm_parse.py")], input=json.dumps(request),
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=""), timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == VERSION, out["version"]
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """render.yml's vLLM units: local (the emulator) and production (with the vault's API key, i.e.
    with --config, and without a key behind sglang_allowed_networks)."""
    return render_units(tmp_path_factory, RENDERED, {"sglang_vllm_version": VERSION})


@pytest.fixture(scope="module")
def drafters(tmp_path_factory):
    """test_contract.py's stand-in drafters, and the role's profiles placed beside them."""
    return stand_in_drafters(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def vllm(vllm_python, rendered, drafters, tmp_path_factory):
    """vLLM's verdicts, in one run of vllm_parse.py (each run spends ~40 s importing vLLM): every
    rendered unit and the filter's argv of every vLLM profile and DRAFTERS ("units": {name:
    (argv, verdict)}; the profiles placed with the stand-in drafters, see test_contract.py
    drafters), FLAG_CASES and REFUSED_BOTH ({name: verdict}), the registered names and the
    choices."""
    tmp = tmp_path_factory.mktemp("secrets")
    units = {n: with_secrets_file(exec_argv(u), tmp) for n, u in rendered.items()}
    for name in sorted(set(PROFILES) | set(DRAFTERS)):
        units["filter/%s" % name] = flt.sglang_argv(drafters["profiles"][name], VERSION, SERVER,
                                                    engine="vllm")
    cases = [(n, a) for n, a, _ in FLAG_CASES] + [("refused: " + n, a) for n, _, a in REFUSED_BOTH]
    names = sorted(units)
    out = vllm_run(vllm_python, {"argvs": [units[n] for n in names] + [a for _, a in cases],
                                 "engine_config": True, "registered": True, "choices": CHOICE_FLAGS})
    results = out["results"]
    return {"units": {n: (units[n], r) for n, r in zip(names, results)},
            "cases": dict(zip([n for n, _ in cases], results[len(names):])),
            "registered": out["registered"], "choices": out["choices"]}


def test_the_units_launch_vllms_cli_with_serve_model_first(rendered):
    for name, unit in rendered.items():
        line = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")][0]
        module = line.split()[2]
        assert module == ("emulator.vllm" if name.startswith("local/") else "vllm.entrypoints.cli.main")
        assert exec_argv(unit)[:1] == ["serve"], name


def test_every_vllm_profile_lands_where_our_table_says(vllm, drafters):
    results = {n: r for n, (_, r) in vllm["units"].items()}
    argvs = {n: a for n, (a, _) in vllm["units"].items()}
    assert {n.rsplit("/", 1)[1].split("+")[0] for n in results} == set(PROFILES) | set(DRAFTERS)
    rejected = ["%s: %s at %s" % (n, r["error"], r["stage"]) for n, r in results.items() if not r["ok"]]
    assert not rejected, "vLLM %s rejects our argv:\n" % VERSION + "\n".join(rejected)
    for name, r in results.items():
        p = drafters["profiles"][name.rsplit("/", 1)[1].split("+")[0]]
        args, cfg = r["fields"]["args"], r["fields"]["config"]
        spec = p.get("speculative_algorithm")
        method = VLLM.SPEC_METHODS[spec.upper()] if spec else None
        assert args["model_tag"] == argvs[name][1], name
        want = {
            "tensor_parallel_size": p["tp_size"], "max_model_len": p["context_length"],
            "gpu_memory_utilization": p["mem_fraction_static"], "max_num_seqs": p["max_running_requests"],
            "enable_prefix_caching": p["enable_prefix_caching"], "reasoning_parser": p["reasoning_parser"],
            "language_model_only": p["language_model_only"], "served_model_name": "Qwen3.6-27B",
            "trust_remote_code": True,
            # MambaModelConfig: align with prefix caching, none without (--mamba-cache-mode: a no-op)
            "mamba_cache_mode": "align" if p["enable_prefix_caching"] else "none",
            "speculative_method": method,
            "num_speculative_tokens": p.get("speculative_num_steps"),
            # the MTP head of the model, or the drafter's own (its config.json)
            "draft_architecture": {None: None, "mtp": "Qwen3_5MTP", "dflash": "DFlashDraftModel",
                                   "eagle3": "LlamaForCausalLMEagle3"}[method],
            "per_request_spec_decode_metrics": "summary" if spec else "none",
        }
        assert {k: cfg[k] for k in want} == want, name
        assert args["tool_call_parser"] == p["tool_call_parser"] and args["enable_auto_tool_choice"], name
        assert args["mamba_cache_mode"] is None, name  # never rendered: deprecated, no effect
        assert args["port"] == 30000, name
        if not name.startswith("filter/"):
            assert args["host"] == ("127.0.0.1" if name.startswith("local/") else "0.0.0.0"), name
        # the key reaches vLLM through the --config YAML, and only there
        assert args["api_key"] == ([KEY] if name.endswith("+api-key") else None), name
        assert KEY not in " ".join(argvs[name]), name


CHOICE_FLAGS = ["--mamba-cache-mode", "--per-request-spec-decode-metrics", "--reasoning-parser",
                "--tool-call-parser"]


def test_vllms_registered_names_hold_our_parsers(vllm):
    """vLLM validates the parser names after parsing (plugins may add some: no argparse choices):
    ours are registered, and the filter's vLLM choice table, where it has one, is vLLM's list."""
    reg = vllm["registered"]
    for name in PROFILES:
        p = DEFAULTS["sglang_profiles"][name]
        assert p["reasoning_parser"] in reg["reasoning_parser"], name
        assert p["tool_call_parser"] in reg["tool_call_parser"], name
    for key, rows in engines.get("vllm").choices.items():
        assert sorted(rows[-1][1]) == reg[key], key
    assert vllm["choices"] == {"--mamba-cache-mode": ["align", "none"],
                               "--per-request-spec-decode-metrics": ["detailed", "none", "summary"]}
    assert "mtp" in reg["speculative_method"] and {"qwen3_5_mtp", "qwen3_next_mtp"} <= set(reg["mtp_aliases"])


# The argv of vllm_mtp_3 with one change: what vLLM accepts and refuses of our flags and of an
# operator's mistakes. The emulator must agree with vLLM on each (accept what it accepts, refuse
# what it refuses).
BASE = flt.sglang_argv(DEFAULTS["sglang_profiles"]["vllm_mtp_3"], VERSION, SERVER, engine="vllm")
NO_SPEC = flt.sglang_argv(DEFAULTS["sglang_profiles"]["vllm_no_spec"], VERSION, SERVER, engine="vllm")


def spec(method="mtp", tokens=3):
    return ["--speculative-config", json.dumps({"method": method, "num_speculative_tokens": tokens})]


def replaced(argv, flag, *values):
    """``argv`` with ``flag``'s value replaced (or the flag removed when no values)."""
    argv = list(argv)
    if flag in argv:
        i = argv.index(flag)
        takes = 0 if i + 1 == len(argv) or argv[i + 1].startswith("--") else 1
        del argv[i:i + 1 + takes]
    return argv + ([flag, *values] if values else [])


FLAG_CASES = [
    ("our argv", BASE, None),
    ("our argv without speculation", NO_SPEC, None),
    ("context 128k", replaced(BASE, "--max-model-len", "128k"), None),  # human_readable_int
    ("mamba mode align (deprecated no-op)", BASE + ["--mamba-cache-mode", "align"], None),
    ("alias qwen3_5_mtp", replaced(BASE, "--speculative-config", spec("qwen3_5_mtp")[1]), None),
    ("alias qwen3_next_mtp", replaced(BASE, "--speculative-config", spec("qwen3_next_mtp")[1]), None),
    ("no prefix caching", replaced(BASE, "--enable-prefix-caching") + ["--no-enable-prefix-caching"], None),
    ("per-request metrics without speculation", NO_SPEC + ["--per-request-spec-decode-metrics", "summary"],
     "--per-request-spec-decode-metrics requires speculative decoding"),
    ("per-request metrics level", replaced(BASE, "--per-request-spec-decode-metrics", "full"),
     "invalid choice: 'full'"),
    ("mamba mode all", BASE + ["--mamba-cache-mode", "all"], "invalid choice: 'all'"),
    ("unknown mamba mode", BASE + ["--mamba-cache-mode", "extra_buffer"], "invalid choice: 'extra_buffer'"),
    ("unknown reasoning parser", replaced(BASE, "--reasoning-parser", "qwen_3"), "qwen_3"),
    ("unknown tool call parser", replaced(BASE, "--tool-call-parser", "qwen3_coda"), "qwen3_coda"),
    ("auto tool choice without a parser", replaced(BASE, "--tool-call-parser"),
     "--enable-auto-tool-choice requires --tool-call-parser"),
    ("method nextn (SGLang's name)", replaced(BASE, "--speculative-config", spec("nextn")[1]), "nextn"),
    ("tokens not an integer", replaced(BASE, "--speculative-config", spec(tokens="three")[1]), "three"),
    ("speculative config not JSON", replaced(BASE, "--speculative-config", "method=mtp"),
     "--speculative-config"),
    ("fraction above 1", replaced(BASE, "--gpu-memory-utilization", "1.5"),
     "less than or equal to 1"),
    ("tp not an integer", replaced(BASE, "--tensor-parallel-size", "2.5"), "invalid int value"),
    ("port not a number", replaced(BASE, "--port", "http"), "invalid int value"),
    ("context beyond the model's", replaced(BASE, "--max-model-len", "524288"), "max_model_len"),
]


@pytest.fixture(scope="module")
def flag_verdicts(vllm):
    return vllm["cases"]


@pytest.mark.parametrize("name,argv,refusal", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_vllm_accepts_and_refuses_as_we_expect(flag_verdicts, name, argv, refusal):
    r = flag_verdicts[name]
    if refusal is None:
        assert r["ok"], r
    else:
        assert not r["ok"] and refusal in r["error"], r


def test_the_deprecated_mamba_mode_changes_nothing(flag_verdicts):
    """vLLM 0.33 derives the mamba cache mode from prefix caching whatever --mamba-cache-mode says
    (the filter's reason for not rendering it)."""
    ours, with_mode = flag_verdicts["our argv"], flag_verdicts["mamba mode align (deprecated no-op)"]
    assert ours["fields"]["config"] == with_mode["fields"]["config"]
    assert flag_verdicts["no prefix caching"]["fields"]["config"]["mamba_cache_mode"] == "none"
    for alias in ("alias qwen3_5_mtp", "alias qwen3_next_mtp"):  # rewritten to mtp
        assert flag_verdicts[alias]["fields"]["config"] == ours["fields"]["config"], alias
    # utils/argparse_utils.py human_readable_int: k is 1000, K 1024
    assert flag_verdicts["context 128k"]["fields"]["config"]["max_model_len"] == 128000


def emulator_verdict(argv):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            emu.resolve(emu.parse(list(argv)), "Qwen3_5ForConditionalGeneration")
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip().splitlines()[-1]}
    except (ValueError, TypeError, KeyError) as e:
        return {"ok": False, "error": str(e)}
    return {"ok": True}


@pytest.mark.parametrize("name,argv,refusal", FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_the_emulator_agrees_with_vllm(flag_verdicts, name, argv, refusal):
    want, got = flag_verdicts[name], emulator_verdict(argv)
    assert got["ok"] == want["ok"], "vLLM: %s; emulator: %s" % (want, got)


# The profile mistakes the filter refuses (sglang_profile_errors) that vLLM refuses too, rendered
# by hand into the argv vLLM would have seen.
REFUSED_BOTH = [
    ("mamba strategy", {"mamba_cache_strategy": "all"}, BASE + ["--mamba-cache-mode", "all"]),
    ("SGLang's method", {"speculative_algorithm": "EAGLE"},
     replaced(BASE, "--speculative-config", spec("eagle")[1])),
    ("steps not an integer", {"speculative_num_steps": "three"},
     replaced(BASE, "--speculative-config", spec(tokens="three")[1])),
    ("fraction above 1", {"mem_fraction_static": 1.5}, replaced(BASE, "--gpu-memory-utilization", "1.5")),
    ("tp not an integer", {"tp_size": 2.5}, replaced(BASE, "--tensor-parallel-size", "2.5")),
]


def test_what_the_filter_refuses_vllm_refuses_too(vllm):
    for name, change, _ in REFUSED_BOTH:
        profile = dict(DEFAULTS["sglang_profiles"]["vllm_mtp_3"], **change)
        errors = flt.sglang_profile_errors({"p": profile}, "p", version=VERSION)
        assert errors, "the filter accepts %s" % name
        r = vllm["cases"]["refused: " + name]
        assert not r["ok"], "vLLM accepts %s: %s" % (name, r)
    # and the filter never renders per-request metrics without speculation
    assert "--per-request-spec-decode-metrics" not in NO_SPEC


# The drafter methods (tests/test_drafters.py holds their preflight): the role's vllm_dflash and the
# docs' EAGLE-3 profile, their drafters the stand-ins of test_contract.py (config.json only). The
# vllm fixture ran them through vLLM's SpeculativeConfig in create_engine_config: the drafter's
# config is loaded into the draft's ModelConfig, wrapped in EAGLEConfig, and its model class
# looked up in vLLM's registry. The rest - the DFlash / EAGLE-3 proposer, its weights and KV cache
# - is the GPU worker's, not run here.
DRAFT_CLASSES = {"dflash": ("DFlashQwen3ForCausalLM", DFLASH_CONFIG),
                 "eagle3": ("Eagle3LlamaForCausalLM", EAGLE3_CONFIG)}


def test_drafter_units_resolve_in_vllms_speculative_config(vllm, drafters):
    for name in DRAFTERS:
        p = drafters["profiles"][name]
        assert flt.sglang_profile_errors(drafters["profiles"], name, version=VERSION) == [], name
        _, r = vllm["units"]["filter/%s" % name]
        assert r["ok"], (name, r)
        method = VLLM.SPEC_METHODS[p["speculative_algorithm"]]
        path = p["speculative_draft_model_path"]  # placed beside the target: the stand-in
        assert path == "%s/%s" % (drafters["dir"], p["draft_model"]["repo"].split("/")[1]), path
        assert r["fields"]["args"]["speculative_config"] == {
            "method": method, "num_speculative_tokens": p["speculative_num_steps"], "model": path}, name
        cls, config = DRAFT_CLASSES[method]
        cfg = r["fields"]["config"]
        assert (cfg["speculative_method"], cfg["num_speculative_tokens"], cfg["draft_model"]) == (
            method, p["speculative_num_steps"], path), name
        assert (cfg["draft_architecture"], cfg["draft_model_class"]) == (config["architectures"][0], cls), \
            name
        assert cfg["parallel_drafting"] is (method == "dflash"), name  # one pass drafts the block
    # vllm_dflash: 15 tokens drafted per block of 16 (the drafter's block_size)
    assert drafters["profiles"]["vllm_dflash"]["speculative_num_steps"] + 1 == \
        DFLASH_CONFIG["dflash_config"]["block_size"]
