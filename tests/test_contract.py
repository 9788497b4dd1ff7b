"""Contract tier: our unit files and our emulator held against SGLang's own argument parser, and
the drafter and adaptive units against its whole resolution.

SGLang is installed --no-deps in its own venv (scripts/contract-venv.sh, cached); the parser runs
there (tests/contract/sglang_parse.py: prepare_server_args, what `python -m sglang.launch_server`
calls; tests/contract/sglang_resolve.py: then ServerArgs.resolve_once on a stood-in CUDA host).
SGLANG_VERSION=X (the version-bump drill) renders the units for release X and parses them with X's
parser, before any host is touched.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from emulator.args import build_parser, merge_config
from bench.profiles import MODEL_ARGS, PROFILE_ARGS
from conftest import ROOT, raw_role_defaults, role_defaults
from hostutil import play
from sglang_perf import engines
from sglang_perf.plan import profile as flt
from sglang_perf.plan.inherit import resolve

SGLANG = engines.get("sglang")  # its flags and choices, held against its parsers here

pytestmark = pytest.mark.contract

DEFAULTS = role_defaults()
VERSION = os.environ.get("SGLANG_VERSION") or DEFAULTS["sglang_version"]
OLD_VERSION = os.environ.get("SGLANG_OLD_VERSION", "0.5.19")
# the SGLang profiles (tests/test_contract_vllm.py holds the vLLM ones against vLLM's parser)
PROFILES = sorted(n for n, p in DEFAULTS["sglang_profiles"].items() if flt.profile_engine(p) == "sglang")
# rendered through render.yml in both inventories (a playbook run each); the deeper NEXTN
# profiles differ from nextn_3step only in the steps, and are parsed from the filter's argv
RENDERED = ["nextn_1step", "nextn_3step", "no_spec"]
KEY = "contract-test-key-0123456789"


@pytest.fixture(scope="module")
def contract():
    env = dict(os.environ, SGLANG_VERSION=VERSION, SGLANG_OLD_VERSION=OLD_VERSION)
    p = subprocess.run([str(ROOT / "scripts/contract-venv.sh")], capture_output=True, text=True,
                       env=env, timeout=3600)
    assert p.returncode == 0, "scripts/contract-venv.sh failed:\n" + p.stderr[-3000:]
    out = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    return out["CONTRACT_PYTHON"], out["CONTRACT_OLD_PATH"], out["CONTRACT_WHEELS"]


def sglang_parse(contract, argvs, old=False, startup=False):
    """SGLang's verdict on each argv: {"ok": bool, "error": str, "fields": {...}}; ``startup``:
    also through its start-up checks that run before the model loads (sglang_parse.py
    startup_checks)."""
    return sglang_run(contract, {"argvs": argvs, "startup": startup}, old)["results"]


def sglang_run(contract, request, old=False):
    python, old_path, _ = contract
    # the older release imports torchvision at module level (never installed here): stubbed
    env = dict(os.environ, PYTHONPATH=old_path if old else "",
               SGLANG_PARSE_STUB_MODULES="torchvision" if old else "")
    p = subprocess.run([python, str(ROOT / "tests/contract/sglang_parse.py")], input=json.dumps(request),
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == (OLD_VERSION if old else VERSION), out["version"]
    return out


def emulator_parse(argv):
    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(merge_config(list(argv), parser))
    except SystemExit:
        return {"ok": False, "error": err.getvalue().strip().splitlines()[-1]}
    except (ValueError, OSError) as e:
        return {"ok": False, "error": str(e)}
    return {"ok": True}


def exec_argv(unit_text):
    """The SGLang arguments of a unit's ExecStart (after `python -m <module>`)."""
    line = [ln for ln in unit_text.splitlines() if ln.startswith("ExecStart=")][0]
    words = shlex.split(line[len("ExecStart="):].replace("$$", "$").replace("%%", "%"))
    assert words[1] == "-m", words
    return words[3:]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Every unit render.yml renders: both inventories x every profile (production with the vault's
    API key, i.e. with --config, and without a key behind sglang_allowed_networks) for
    SGLANG_VERSION."""
    return render_units(tmp_path_factory, RENDERED, {"sglang_version": VERSION})


def render_units(tmp_path_factory, profiles, versions):
    """{inventory/host/profile[+api-key]: unit text} of render.yml in both inventories for each of
    ``profiles``, with the engine release variables ``versions``."""
    units = {}
    for inventory in ("local", "production"):
        for profile in profiles:
            for key in ([None, KEY] if inventory == "production" else [None]):
                d = tmp_path_factory.mktemp("units")
                extra = dict(versions, sglang_profile=profile)
                if key:  # the vault file's variable, as production gets it
                    extra["vault_sglang_api_key"] = key
                elif inventory == "production":  # no key: the firewall instead
                    extra.update(sglang_api_key="", sglang_allowed_networks=["10.1.230.0/24"])
                p = play("-i", "inventories/%s" % inventory, "playbooks/render.yml",
                         "-e", "render_dir=%s" % d, "-e", json.dumps(extra))
                assert p.returncode == 0, p.stdout[-3000:]
                for unit in sorted(d.glob("*.service")):
                    name = "%s/%s/%s%s" % (inventory, unit.stem, profile, "+api-key" if key else "")
                    units[name] = unit.read_text()
    assert len(units) == 3 * len(profiles)
    return units


def with_secrets_file(argv, tmp_path):
    """--config points at the host's secrets file: replace it with one written as the role writes
    it (roles/sglang/tasks/service.yml: {'api-key': sglang_api_key} | to_nice_yaml)."""
    if "--config" not in argv:
        return argv
    task = (ROOT / "roles/sglang/tasks/service.yml").read_text()
    assert "{{ {'api-key': sglang_api_key} | to_nice_yaml }}" in task
    cfg = tmp_path / "secrets.yaml"
    cfg.write_text(yaml.safe_dump({"api-key": KEY}, default_flow_style=False))
    argv = list(argv)
    argv[argv.index("--config") + 1] = str(cfg)
    return argv


def test_every_rendered_unit_passes_sglangs_parser_and_start_up_checks(contract, rendered,
                                                                       tmp_path):
    names = sorted(rendered)
    argvs = [with_secrets_file(exec_argv(rendered[n]), tmp_path) for n in names]
    results = sglang_parse(contract, argvs, startup=True)
    rejected = ["%s: %s" % (n, r["error"]) for n, r in zip(names, results) if not r["ok"]]
    assert not rejected, "SGLang %s rejects rendered units:\n" % VERSION + "\n".join(rejected)
    by_name = dict(zip(names, results))
    for n, r in by_name.items():
        profile = DEFAULTS["sglang_profiles"][n.rsplit("/", 1)[1].split("+")[0]]
        assert r["fields"]["speculative_num_steps"] == profile.get("speculative_num_steps"), n
        assert r["fields"]["tp_size"] == profile["tp_size"], n
        # the key reaches SGLang through the --config file, and only there
        assert r["fields"]["api_key"] == (KEY if n.endswith("+api-key") else None), n
        assert KEY not in rendered[n]


def test_every_sglang_profile_passes_sglangs_parser_and_start_up_checks(contract):
    """Each SGLang profile of the defaults (the deeper NEXTN ones too), rendered by the filter:
    SGLang's own parser and start-up checks take it, with the steps and draft tokens it says."""
    argvs = [MODEL_ARGS + flt.sglang_argv(DEFAULTS["sglang_profiles"][n], VERSION) for n in PROFILES]
    results = sglang_parse(contract, argvs, startup=True)
    assert [n for n, r in zip(PROFILES, results) if not r["ok"]] == [], results
    for n, r in zip(PROFILES, results):
        profile = DEFAULTS["sglang_profiles"][n]
        assert r["fields"]["speculative_num_steps"] == profile.get("speculative_num_steps"), n
        assert r["fields"]["speculative_num_draft_tokens"] == profile.get("speculative_num_draft_tokens"), n
    assert {"nextn_2step", "nextn_4step", "nextn_5step"} <= set(PROFILES)


def test_multinode_units_are_what_sglang_parses(contract, tmp_path):
    """A two-host deployment (production settings, tensor parallel 2 over 2 hosts): render.yml's
    units, parsed by SGLang 0.5.23, carry the node count, each node's rank and rank 0's address."""
    fleet = tmp_path / "fleet.yml"
    fleet.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"children": {"pair": {
        "hosts": {"gpu-b": {"ansible_host": "10.1.230.173"}, "gpu-a": {"ansible_host": "10.1.230.172"}},
        "vars": {"sglang_multinode_group": "pair"}}}}}}}, sort_keys=False))
    out = tmp_path / "units"
    p = play("-i", "inventories/production", "-i", str(fleet), "playbooks/render.yml", "--limit", "pair",
             "-e", "render_dir=%s" % out,
             "-e", json.dumps({"sglang_version": VERSION, "vault_sglang_api_key": KEY}))
    assert p.returncode == 0, p.stdout[-3000:]
    names = ["gpu-b", "gpu-a"]  # inventory order: gpu-b is rank 0
    units = [(out / ("%s.service" % n)).read_text() for n in names]
    results = sglang_parse(contract, [with_secrets_file(exec_argv(u), tmp_path) for u in units])
    for rank, (name, unit, r) in enumerate(zip(names, units, results)):
        assert r["ok"], (name, r)
        assert (r["fields"]["nnodes"], r["fields"]["node_rank"]) == (2, rank), name
        assert r["fields"]["dist_init_addr"] == "10.1.230.173:20000", name
        assert r["fields"]["tp_size"] == 2 and r["fields"]["tp_size"] % r["fields"]["nnodes"] == 0
        assert ("Restart=always" if rank else "Restart=on-failure") in unit.splitlines()


def test_the_original_launchs_mistakes_are_what_sglang_rejects(contract):
    """The old mamba flag crashed the original launch's server: 0.5.23's parser rejects it, and our filter
    never renders it for 0.5.23."""
    hand = MODEL_ARGS + ["--mamba-scheduler-strategy", "extra_buffer"]
    r = sglang_parse(contract, [hand])[0]
    assert not r["ok"] and "unrecognized arguments: --mamba-scheduler-strategy" in r["error"]
    assert "--mamba-scheduler-strategy" not in flt.sglang_argv(
        DEFAULTS["sglang_profiles"]["nextn_3step"], VERSION)


# Every flag our profiles and server settings use, with good values, then the ways an operator
# gets them wrong. The emulator must agree with SGLang on each: accept what it accepts (for our
# flags) and never accept what it rejects.
FLAG_CASES = [
    ("profile " + name, MODEL_ARGS + args) for name, args in sorted(PROFILE_ARGS.items())
] + [
    ("server flags", MODEL_ARGS + ["--host", "0.0.0.0", "--port", "30001", "--enable-metrics",
                                   "--api-key", KEY, "--context-length", "131072"]),
    ("multi-node flags", MODEL_ARGS + ["--nnodes", "2", "--node-rank", "1",
                                       "--dist-init-addr", "10.0.0.1:5000"]),
    ("tensor-parallel-size alias", ["--model-path", "/m", "--tensor-parallel-size", "2"]),
    ("model alias", ["--model", "/m"]),
    ("old mamba flag", MODEL_ARGS + ["--mamba-scheduler-strategy", "extra_buffer"]),
    ("steps not an integer", MODEL_ARGS + ["--speculative-num-steps", "three"]),
    ("tp not an integer", MODEL_ARGS + ["--tp-size", "2.5"]),
    ("fraction not a number", MODEL_ARGS + ["--mem-fraction-static", "high"]),
    ("max running not an integer", MODEL_ARGS + ["--max-running-requests", "many"]),
    ("port not a number", MODEL_ARGS + ["--port", "http"]),
    ("context 128k", MODEL_ARGS + ["--context-length", "128k"]),
    ("unknown mamba strategy", MODEL_ARGS + ["--mamba-radix-cache-strategy", "bogus"]),
    ("unknown reasoning parser", MODEL_ARGS + ["--reasoning-parser", "nope"]),
    ("unknown tool-call parser", MODEL_ARGS + ["--tool-call-parser", "nope"]),
    ("store_true flag with a value", MODEL_ARGS + ["--enable-metrics", "true"]),
    ("abbreviated flag (argparse prefix)", MODEL_ARGS + ["--speculative-num-step", "3"]),
    ("unknown flag", MODEL_ARGS + ["--no-such-flag", "1"]),
    ("missing value", MODEL_ARGS + ["--speculative-num-steps"]),
    ("no model path", ["--tp-size", "2"]),
    ("underscore flag", MODEL_ARGS + ["--api_key", KEY]),
]


def test_the_emulator_accepts_exactly_what_sglang_accepts(contract, tmp_path):
    cfg_ok, cfg_bad = tmp_path / "ok.yaml", tmp_path / "bad.yaml"
    cfg_ok.write_text("api-key: %s\nenable-metrics: true\n" % KEY)
    cfg_bad.write_text("api_key: %s\n" % KEY)
    cases = FLAG_CASES + [("--config with api-key", MODEL_ARGS + ["--config", str(cfg_ok)]),
                          ("--config with api_key", MODEL_ARGS + ["--config", str(cfg_bad)])]
    verdicts = sglang_parse(contract, [argv for _, argv in cases])
    disagree = []
    for (name, argv), s in zip(cases, verdicts):
        e = emulator_parse(argv)
        if e["ok"] != s["ok"]:
            disagree.append("%s: SGLang %s, emulator %s" % (
                name, "accepts" if s["ok"] else "rejects (%s)" % s["error"],
                "accepts" if e["ok"] else "rejects (%s)" % e["error"]))
    assert not disagree, "\n".join(disagree)
    ours = {name: s for (name, _), s in zip(cases, verdicts)}
    for name in ["profile " + p for p in PROFILE_ARGS] + ["server flags", "--config with api-key"]:
        assert ours[name]["ok"], (name, ours[name])  # our flags: both accept
    assert not ours["old mamba flag"]["ok"] and not ours["--config with api_key"]["ok"]


def emulator_start(argv):
    """The emulator's verdict at start-up: its parser, then its resolve_once (emulator/cli.py
    main), errors worded as SGLang's."""
    from emulator.args import resolve
    parser = build_parser()
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            ns = parser.parse_args(merge_config(list(argv), parser))
        resolve(ns, "Qwen3_5ForConditionalGeneration")
    except SystemExit:
        return {"ok": False, "error": "argparse"}
    except (AssertionError, ValueError, TypeError) as e:
        return {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
    return {"ok": True}


SPEC3 = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
         "--speculative-num-draft-tokens", "4"]
# Values that pass argparse and that SGLang's start-up checks (sglang_parse.py startup_checks)
# accept or refuse; the preflight refuses the same (test_filter.py, test_deploy_bad_inputs.py).
STARTUP_CASES = [
    ("profile " + name, MODEL_ARGS + args, True) for name, args in sorted(PROFILE_ARGS.items())
] + [
    ("lower-case nextn (SGLang upper-cases it)",
     MODEL_ARGS + ["--speculative-algorithm", "nextn"] + SPEC3, True),
    ("unknown speculative algorithm", MODEL_ARGS + ["--speculative-algorithm", "mtp"] + SPEC3, False),
    ("served model name with a colon", MODEL_ARGS + ["--served-model-name", "qwen3.6:27b"], False),
    ("tp not divisible by the nodes", MODEL_ARGS + ["--tp-size", "3", "--nnodes", "2"], False),
]


def test_sglangs_start_up_checks_and_the_emulator_agree(contract):
    verdicts = sglang_parse(contract, [argv for _, argv, _ in STARTUP_CASES], startup=True)
    for (name, argv, ok), s in zip(STARTUP_CASES, verdicts):
        assert s["ok"] == ok, (name, s)
        e = emulator_start(argv)
        assert e["ok"] == ok, (name, e)
        if not ok:  # the same words at start-up
            assert e["error"] == s["error"], (name, e["error"], s["error"])
    # what each refused value is refused for by the preflight, by name
    p = {"speculative_algorithm": "mtp", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 4}
    assert "speculative_algorithm must be one of" in flt.sglang_profile_errors({"p": p}, "p")[0]
    assert flt.sglang_profile_errors({"p": dict(p, speculative_algorithm="nextn")}, "p") == []
    assert verdicts[[c[0] for c in STARTUP_CASES].index("lower-case nextn (SGLang upper-cases it)")][
        "fields"]["speculative_algorithm"] == "nextn"  # as given; rendered upper-case by the filter
    assert flt.sglang_argv({"speculative_algorithm": "nextn"}, VERSION) == [
        "--speculative-algorithm", "NEXTN"]


def test_the_emulator_resolves_adaptive_steps_as_sglang_does(contract, tmp_path):
    """speculative_hook.py _init_adaptive_speculative_params through both resolutions: the steps
    held to the config's candidates (refused in SGLang's words), the middle candidate when unset,
    draft tokens steps + 1 whatever was given; a config file's own candidates."""
    from emulator.args import resolve as emulator_resolve
    conf = tmp_path / "adaptive.json"
    conf.write_text(json.dumps({"1": {"candidate_steps": [2, 4]}}))
    nextn = MODEL_ARGS + ["--speculative-algorithm", "NEXTN", "--speculative-adaptive"]
    own = ["--speculative-adaptive-config", str(conf)]

    def steps(n):
        return ["--speculative-num-steps", str(n)]

    cases = [nextn, nextn + steps(2), nextn + steps(3), nextn + steps(0), nextn + steps(7),
             nextn + steps(3) + ["--speculative-num-draft-tokens", "6"],
             nextn + ["--speculative-num-draft-tokens", "4"], nextn + own, nextn + own + steps(2),
             nextn + own + steps(3),
             MODEL_ARGS + ["--speculative-algorithm", "EAGLE3", "--speculative-adaptive"] + steps(2)]
    keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
            "speculative_adaptive")
    for argv, s in zip(cases, sglang_resolve(contract, cases)):
        try:
            cfg = emulator_resolve(build_parser().parse_args(argv), "Qwen3_5ForConditionalGeneration")
            e = {"ok": True, "fields": {k: cfg[k] for k in keys}}
        except ValueError as exc:
            e = {"ok": False, "error": "ValueError: %s" % exc}
        if s["ok"]:
            assert e == {"ok": True, "fields": {k: s["fields"][k] for k in keys}}, (argv, s)
        else:
            assert e == {"ok": False, "error": s["error"]}, (argv, s)


def test_every_builtin_algorithm_the_filter_accepts_is_one_sglang_accepts(contract):
    argvs = [MODEL_ARGS + ["--speculative-algorithm", a.lower()] + SPEC3 for a in SGLANG.SPEC_ALGORITHMS]
    results = sglang_parse(contract, argvs, startup=True)
    bad = [(a, r["error"]) for a, r in zip(SGLANG.SPEC_ALGORITHMS, results) if not r["ok"]
           and "Unknown speculative algorithm" in r["error"]]
    assert not bad, bad


@pytest.mark.parametrize("old", [False, True], ids=["SGLANG_VERSION", "SGLANG_OLD_VERSION"])
def test_the_choice_table_is_the_releases_own_parser(contract, old):
    """The choices of engines/sglang.py (the preflight's parser and strategy names) row by row
    against the choices of that release's argparse: a release that adds or drops a name fails here
    until its row is added."""
    version = OLD_VERSION if old else VERSION
    flags = {s: flt.flag_for(s, version) for s in SGLANG.choices if s not in SGLANG.choices_outside_argparse}
    out = sglang_run(contract, {"argvs": [], "choices": sorted(flags.values())}, old)
    for setting, flag in flags.items():
        assert flt.choices_for(setting, version) == tuple(out["choices"][flag]), (
            "sglang_perf/engines/sglang.py choices[%r] for %s differs from SGLang's %s choices: "
            "add a row %r" % (setting, version, flag, (version, tuple(out["choices"][flag]))))


def test_the_flag_table_holds_for_the_older_release_it_claims(contract):
    """FLAGS says 0.5.14-0.5.19 know both mamba spellings (the old one a deprecated alias):
    render every profile for OLD_VERSION and parse it with that release's own parser, and the
    old spelling too."""
    assert flt.version_tuple(OLD_VERSION) >= flt.version_tuple(SGLANG.oldest)
    names = PROFILES
    argvs = [MODEL_ARGS + flt.sglang_argv(DEFAULTS["sglang_profiles"][n], OLD_VERSION) for n in names]
    old_spelling = MODEL_ARGS + ["--mamba-scheduler-strategy", "extra_buffer"]
    results = sglang_parse(contract, argvs + [old_spelling], old=True)
    rejected = ["%s: %s" % (n, r["error"]) for n, r in zip(names + ["old spelling"], results)
                if not r["ok"]]
    assert not rejected, "SGLang %s rejects:\n" % OLD_VERSION + "\n".join(rejected)
    assert flt.flag_for("mamba_cache_strategy", OLD_VERSION) == "--mamba-radix-cache-strategy"
    assert "--mamba-radix-cache-strategy" in argvs[names.index("nextn_3step")]


def test_the_flag_tables_oldest_rows_match_the_013_source(contract):
    """0.5.10-0.5.13 know only --mamba-scheduler-strategy. 0.5.13 cannot be imported without a
    real torchvision (its processors register with transformers' AutoImageProcessor), so its
    server_args.py is read from the wheel: the flag the table renders is defined there, the
    newer spelling is not."""
    import zipfile
    wheel = sorted(Path(contract[2]).glob("sglang-0.5.13-*.whl"))
    assert wheel, "scripts/contract-venv.sh downloads the 0.5.13 wheel into %s" % contract[2]
    with zipfile.ZipFile(wheel[0]) as z:
        source = z.read("sglang/srt/server_args.py").decode()
    assert flt.flag_for("mamba_cache_strategy", "0.5.13") == "--mamba-scheduler-strategy"
    assert '"--mamba-scheduler-strategy"' in source
    assert "--mamba-radix-cache-strategy" not in source
    for setting in SGLANG.flags:
        assert '"%s"' % flt.flag_for(setting, "0.5.13") in source, setting


# --- drafters and adaptive speculation through SGLang's own resolution ------------------------
#
# Stand-in drafters (config.json only, no weights), holding what SGLang 0.5.23's and vLLM 0.33's
# code reads of one - resolution before the load, and the model classes at the load - and no more:
#   architectures   SGLang: speculative_hook.py _resolve_speculative_algorithm_alias reads it (a
#                   Gemma-4 draft is promoted), its model registry builds it (models/dflash.py,
#                   models/llama_eagle3.py EntryClass); vLLM: EAGLEConfig keeps a name starting
#                   with DFlash / ending in Eagle3, and its registry maps it (models/registry.py:
#                   DFlashDraftModel -> qwen3_dflash, LlamaForCausalLMEagle3 -> llama_eagle3);
#   model_type      transformers' AutoConfig, which both engines load the drafter's config with
#                   (vLLM's DFlash Qwen3 model takes a Qwen3Config; an EAGLE-3 head a Llama one);
#   dflash_config   block_size: SGLang's _handle_dflash reads it when the argv gives no block
#                   (dflash_utils.py parse_dflash_draft_config; 16, the role's block), the draft
#                   worker compares it with the block it runs; target_layer_ids: the target layers
#                   whose hidden states the drafter takes (SGLang validates them there, vLLM's
#                   eagle3_utils.py get_eagle3_aux_layers_from_config reads them): what SGLang's
#                   build_target_layer_ids picks for a 5-layer drafter on the 64-layer target;
#   num_hidden_layers   the drafter's layers: 5 (the DFlash drafter's figure the role counts in
#                   kv_bytes_per_token), 1 (an EAGLE-3 head);
#   hidden_size, vocab_size   the target's (vllm_parse.py STAND_IN_TEXT, transformers' Qwen3.5
#                   vocabulary): both engines feed the target's hidden states into the drafter
#                   (vLLM: target_hidden_size, else hidden_size) and draft in its vocabulary.
DFLASH_CONFIG = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3",
                 "dflash_config": {"block_size": 16, "target_layer_ids": [1, 16, 31, 46, 61]},
                 "num_hidden_layers": 5, "hidden_size": 5120, "vocab_size": 248320}
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                 "num_hidden_layers": 1, "hidden_size": 5120, "vocab_size": 248320}
# The EAGLE-3 drafter docs/profiles-and-engines.md names (its size figures: stand-ins, read by the
# memory preflight only).
EAGLE3_DRAFT = {"repo": "Ex0bit/Qwen3.6-27B-PRISM-EAGLE3", "revision": "main", "params_b": 1.7,
                "kv_bytes_per_token": 10240}
# The role's drafter and adaptive profiles beside its defaults: the EAGLE-3 profile the docs show
# (on both engines) and NEXTN with adaptive steps, each on its base as an operator writes it.
EXTRA_PROFILES = {
    "eagle3": {"base": "nextn_3step", "speculative_algorithm": "EAGLE3", "draft_model": EAGLE3_DRAFT},
    "nextn_adaptive": {"base": "nextn_3step", "speculative_adaptive": True},
    "vllm_eagle3": {"base": "vllm_mtp_3", "speculative_algorithm": "EAGLE3", "draft_model": EAGLE3_DRAFT},
}
# A second DFlash drafter whose config.json says another block (loaded in place: draft_model.path).
BLOCK_8 = "dflash-block-8"


def stand_in_drafters(model_dir):
    """The stand-in drafters in ``model_dir``, and the role's profiles (with EXTRA_PROFILES) flat
    and placed by the deploy plan's own code (sglang_perf.plan.inherit.resolve: each drafter beside the
    target in that directory), so that the argv the records render names them."""
    for name, config in (("Qwen3.6-27B-DFlash", DFLASH_CONFIG), ("Qwen3.6-27B-PRISM-EAGLE3", EAGLE3_CONFIG),
                         (BLOCK_8, dict(DFLASH_CONFIG, dflash_config=dict(DFLASH_CONFIG["dflash_config"],
                                                                          block_size=8)))):
        (model_dir / name).mkdir()
        (model_dir / name / "config.json").write_text(json.dumps(config, indent=1))
    profiles = dict(raw_role_defaults()["sglang_profiles"], **EXTRA_PROFILES)
    flat, _, problems = resolve(profiles, None, str(model_dir))
    assert problems == []
    return {"dir": model_dir, "profiles": flat}


@pytest.fixture(scope="module")
def drafters(tmp_path_factory):
    return stand_in_drafters(tmp_path_factory.mktemp("models"))


def sglang_resolve(contract, argvs, old=False):
    """Each argv through SGLang's parser and its whole resolution as on a CUDA host
    (tests/contract/sglang_resolve.py): {"ok", "fields" (resolved), "warnings", "error"}."""
    python, old_path, _ = contract
    p = subprocess.run([python, str(ROOT / "tests/contract/sglang_resolve.py")],
                       input=json.dumps({"argvs": argvs}), capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=old_path if old else ""), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    assert out["version"] == (OLD_VERSION if old else VERSION), out["version"]
    return out["results"]


# Drafter and adaptive profiles (tests/test_drafters.py holds their preflight): the role's `dflash`,
# the docs' EAGLE-3 profile, NEXTN with adaptive steps.
DRAFTER_PROFILES = ("dflash", "eagle3", "nextn_adaptive")


def changed(drafters, name, **change):
    """Profile ``name`` of ``drafters`` with settings changed (None: removed)."""
    p = dict(drafters["profiles"][name], **change)
    return {k: v for k, v in p.items() if v is not None}


def block_8(drafters, **change):
    """The role's `dflash` loading the block-8 drafter in place."""
    p = changed(drafters, "dflash", **change)
    path = str(drafters["dir"] / BLOCK_8)
    return dict(p, draft_model=dict(p["draft_model"], path=path), speculative_draft_model_path=path)


# What SGLang's own resolution does with the silent overrides the preflight refuses
# (engines/sglang.py spec_errors / _dflash_errors): (name, profile, the preflight's words, what
# SGLang resolves the field to, SGLang's warning or None when it says nothing).
def refused_cases(drafters):
    return [
        ("DFLASH with 3 steps", changed(drafters, "dflash", speculative_num_steps=3),
         "speculative_num_steps must be 1 (or unset) with DFLASH, got 3",
         ("speculative_num_steps", 1), "overriding speculative_num_steps=3 to 1"),
        ("DFLASH with topk 2", changed(drafters, "dflash", speculative_eagle_topk=2),
         "speculative_eagle_topk must be 1 (or unset) with DFLASH, got 2",
         ("speculative_eagle_topk", 1), "overriding speculative_eagle_topk=2 to 1"),
        ("adaptive with topk 2", changed(drafters, "nextn_adaptive", speculative_eagle_topk=2),
         "speculative_adaptive needs speculative_eagle_topk 1, got 2",
         ("speculative_adaptive", False), "speculative_adaptive disabled: speculative_eagle_topk=2"),
        ("adaptive on DFLASH", changed(drafters, "dflash", speculative_adaptive=True),
         "speculative_adaptive needs speculative_algorithm NEXTN or EAGLE or EAGLE3, got DFLASH",
         ("speculative_adaptive", False), "speculative_adaptive disabled: speculative_algorithm=DFLASH"),
        # no block in the profile: SGLang takes the drafter's own (8 here), without a word
        ("DFLASH without its block", block_8(drafters, speculative_num_draft_tokens=None),
         "needs sglang_profiles.p.speculative_num_draft_tokens, the block size",
         ("speculative_num_draft_tokens", 8), None),
    ]


# What SGLang's resolution does with settings the preflight either does not check (a block the
# drafter's config does not say: the role's model step reads the drafter) or checks per release
# (adaptive speculation's candidate steps, engines/sglang.py release_errors): (name, profile, the
# field and its value, or SGLang's refusal at start-up, per release).
def unchecked_cases(drafters):
    return [
        # a block the drafter's config.json does not say: resolution keeps the argv's, without a
        # word (the draft worker warns "DFLASH block size mismatch" when it loads, on a GPU)
        ("DFLASH block 16 on a drafter of 8", block_8(drafters), ("speculative_num_draft_tokens", 16)),
        # adaptive speculation starts from a step among its candidate steps
        # (adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG: 0.5.19 [0, 1, 3, 7], 0.5.23 [0, 1, 3, 5, 7])
        ("adaptive from 2 steps", changed(drafters, "nextn_2step", speculative_adaptive=True),
         {"*": "--speculative-num-steps=2 is not in the adaptive config candidate_steps"}),
        ("adaptive from 5 steps", changed(drafters, "nextn_5step", speculative_adaptive=True),
         {OLD_VERSION: "--speculative-num-steps=5 is not in the adaptive config candidate_steps",
          VERSION: ("speculative_num_steps", 5)}),
    ]


@pytest.fixture(scope="module", params=[False, True], ids=["SGLANG_VERSION", "SGLANG_OLD_VERSION"])
def resolved(request, contract, drafters):
    """One run of sglang_resolve.py per release: DRAFTER_PROFILES, refused_cases and
    unchecked_cases, rendered by the records for that release, each through SGLang's resolution."""
    old = request.param
    version = OLD_VERSION if old else VERSION
    refused, unchecked = refused_cases(drafters), unchecked_cases(drafters)
    cases = [(n, drafters["profiles"][n]) for n in DRAFTER_PROFILES]
    cases += [(c[0], c[1]) for c in refused + unchecked]
    results = sglang_resolve(contract, [MODEL_ARGS + flt.sglang_argv(p, version) for _, p in cases], old)
    return {"version": version, "profiles": dict(cases), "refused": refused, "unchecked": unchecked,
            "results": dict(zip([n for n, _ in cases], results))}


def test_drafter_and_adaptive_units_resolve_in_sglang_as_rendered(resolved, drafters):
    """The role's drafter and adaptive profiles, rendered by the records for each release, go
    through SGLang's parser and its whole resolution (a CUDA host stood in) and come out as the
    profile says: algorithm (NEXTN as EAGLE, as the drift table reports it), steps, topk, draft
    tokens (DFLASH: the block, also the drafter's config's), the drafter, adaptive speculation on -
    with no warning from SGLang at all, i.e. nothing overridden."""
    version, results = resolved["version"], resolved["results"]
    for n in DRAFTER_PROFILES:
        p, r = resolved["profiles"][n], results[n]
        assert flt.sglang_profile_errors(drafters["profiles"], n, version=version) == [], n
        assert r["ok"], "SGLang %s refuses %s: %s" % (version, n, r["error"])
        assert r["warnings"] == [], (n, r["warnings"])
        algo = p["speculative_algorithm"]
        one = 1 if algo == "DFLASH" else None  # DFLASH: one step of topk 1, unset in the profile
        want = {"speculative_algorithm": SGLANG.SPEC_REPORTED_AS.get(algo, algo),
                "speculative_num_steps": p.get("speculative_num_steps", one),
                "speculative_eagle_topk": p.get("speculative_eagle_topk", one),
                "speculative_num_draft_tokens": p["speculative_num_draft_tokens"],
                "speculative_draft_model_path": p.get("speculative_draft_model_path"),
                "speculative_adaptive": bool(p.get("speculative_adaptive")),
                "max_running_requests": p["max_running_requests"], "tp_size": p["tp_size"]}
        assert {k: r["fields"][k] for k in want} == want, n
    assert results["dflash"]["fields"]["speculative_num_draft_tokens"] == \
        DFLASH_CONFIG["dflash_config"]["block_size"]
    # the draft attention backend SGLang picks when the profile leaves it unset runs on SM 8.6
    dflash = dict(drafters["profiles"]["dflash"], speculative_draft_attention_backend=results["dflash"][
        "fields"]["speculative_draft_attention_backend"])
    assert SGLANG.hardware_errors(dflash, "p", {"compute_capability": 8.6}) == []


def test_what_the_preflight_refuses_sglangs_resolution_overrides(resolved):
    """Each silent override the preflight refuses by name is one SGLang's own resolution makes:
    the field comes out changed, with SGLang's warning (or none: a block left to the drafter)."""
    version, results = resolved["version"], resolved["results"]
    for name, p, words, (field, value), warning in resolved["refused"]:
        errors = flt.sglang_profile_errors({"p": p}, "p", version=version)
        assert any(words in e for e in errors), (name, errors)
        r = results[name]
        assert r["ok"], (name, r)
        assert r["fields"][field] == value, (name, field, r["fields"][field])
        said = [w for w in r["warnings"] if "speculative_hook" in w]
        if warning is None:
            assert said == [], (name, said)
        else:
            assert len(said) == 1 and warning in said[0], (name, r["warnings"])


def test_what_sglang_resolves_beyond_the_profiles_own_checks(resolved):
    """SGLang's answers on a block the drafter's config does not say (kept without a word: the
    role's model step compares the two on the host) and on adaptive speculation from a step
    outside the release's candidate steps, which the preflight refuses for exactly the releases
    SGLang refuses it in."""
    version, results = resolved["version"], resolved["results"]
    for name, p, want in resolved["unchecked"]:
        r = results[name]
        if isinstance(want, dict):
            want = want.get(version, want.get("*"))
        if p.get("speculative_adaptive"):
            errors = flt.sglang_profile_errors({"p": p}, "p", version=version)
            refused = [e for e in errors if "with speculative_adaptive on SGLang %s" % version in e]
            assert bool(refused) == isinstance(want, str), (name, version, errors)
        if isinstance(want, str):
            assert not r["ok"] and want in r["error"], (name, r)
        else:
            assert r["ok"] and r["fields"][want[0]] == want[1], (name, r)
            assert [w for w in r["warnings"] if "speculative_hook" in w] == [], (name, r["warnings"])
