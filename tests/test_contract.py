"""Contract tier: our unit files and our emulator held against SGLang's own argument parser.

SGLang is installed --no-deps in its own venv (scripts/contract-venv.sh, cached); the parser runs
there (tests/contract/sglang_parse.py: prepare_server_args, what `python -m sglang.launch_server`
calls). SGLANG_VERSION=X (the version-bump drill) renders the units for release X and parses them
with X's parser, before any host is touched.
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

from bench.emulator.args import build_parser, merge_config
from bench.profiles import MODEL_ARGS, PROFILE_ARGS
from conftest import ROOT, role_defaults
from hostutil import play
from sglang_perf import engines
from sglang_perf import profile as flt

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
    """The emulator's verdict at start-up: its parser, then its resolve_once (bench/emulator/cli.py
    main), errors worded as SGLang's."""
    from bench.emulator.args import resolve
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


DRAFT_MODEL = {"repo": "z-lab/Qwen3.6-27B-DFlash", "params_b": 1.7, "kv_bytes_per_token": 10240}
# Drafter and adaptive profiles (tests/test_drafters.py holds their preflight): the argv the
# records render for them is what each release's parser takes, landing in the fields named.
DRAFTER_PROFILES = {
    "dflash": {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
               "speculative_draft_model_path": "/srv/models/Qwen3.6-27B-DFlash",
               "draft_model": DRAFT_MODEL},
    "eagle3": {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
               "speculative_num_draft_tokens": 4, "speculative_draft_model_path": "/srv/models/eagle3",
               "draft_model": DRAFT_MODEL},
    "nextn_adaptive": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                       "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4,
                       "speculative_adaptive": True},
}


@pytest.mark.parametrize("old", [False, True], ids=["SGLANG_VERSION", "SGLANG_OLD_VERSION"])
def test_drafter_and_adaptive_units_are_what_sglangs_parser_takes(contract, old):
    version = OLD_VERSION if old else VERSION
    names = sorted(DRAFTER_PROFILES)
    for n in names:
        assert flt.sglang_profile_errors(DRAFTER_PROFILES, n, version=version) == [], n
    argvs = [MODEL_ARGS + flt.sglang_argv(DRAFTER_PROFILES[n], version) for n in names]
    # the older release through its parser alone, as its other profiles (its start-up checks
    # resolve NEXTN before from_string, which the stand-in above calls directly)
    results = sglang_parse(contract, argvs, old=old, startup=not old)
    rejected = ["%s: %s" % (n, r["error"]) for n, r in zip(names, results) if not r["ok"]]
    assert not rejected, "SGLang %s rejects:\n" % version + "\n".join(rejected)
    for n, r in zip(names, results):
        p = DRAFTER_PROFILES[n]
        for key in ("speculative_algorithm", "speculative_num_steps", "speculative_num_draft_tokens",
                    "speculative_draft_model_path"):
            assert r["fields"][key] == p.get(key), (n, key)
        assert r["fields"]["speculative_adaptive"] is bool(p.get("speculative_adaptive")), n
