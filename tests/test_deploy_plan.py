"""The deploy plan (plugins/action/sglang_deploy_plan.py, sglang_perf/plan/deploy.py) on the
inventories' hosts, without a play (tests/planutil.py: Ansible's own variable manager gives the
host's variables): every case of the bad-input matrix refused with words that name the variable
(moved here from the container: tests/test_deploy_bad_inputs.py keeps one case per class end to
end), what the roles read from the plan, and that no secret enters it."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest

from bad_inputs import CASES, HOST_SIDE, P3
from conftest import ROOT
from planutil import PRODUCTION, plan_for

KEY = "k" * 24 + "-secret-api-key"
TOKEN = "hf_" + "T" * 30


@pytest.fixture(scope="module")
def good():
    """The role defaults' plan (the whole production gate plan), on the local inventory."""
    return plan_for(plumbing=False)


@pytest.mark.parametrize("case, extra, words", [c for c in CASES if c[0] not in HOST_SIDE],
                         ids=[c[0] for c in CASES if c[0] not in HOST_SIDE])
def test_bad_input_is_refused_by_the_plan_naming_the_variable(case, extra, words):
    plan = plan_for(extra)
    text = "; ".join(plan["problems"])
    assert plan["problems"], "no refusal for %s" % case
    for w in words:
        assert w in text, "%r not in: %s" % (w, text)
    for key in ("sglang_api_key", "sglang_hf_token"):
        if key in extra:
            assert extra[key] not in json.dumps(plan, default=str), "the rejected secret is in the plan"


@pytest.mark.parametrize("case, extra, words", [c for c in CASES if c[0] in HOST_SIDE],
                         ids=[c[0] for c in CASES if c[0] in HOST_SIDE])
def test_what_only_the_host_tells_passes_the_plan(case, extra, words):
    assert plan_for(extra)["problems"] == []


def test_the_local_inventory_plans_without_a_problem(good):
    assert good["problems"] == []
    assert good["roles"] == ["nvidia_gpu", "sglang", "sglang_gate"]


def test_the_plan_holds_what_the_roles_read(good):
    release = good["release"]
    assert (release["engine"], release["version"], release["label"]) == ("sglang", "0.5.23", "SGLang")
    assert release["name"].startswith("0.5.23-") and len(release["name"]) == len("0.5.23-") + 10
    assert good["release"]["venv"] == "/opt/sglang/releases/%s/venv" % good["release"]["name"]
    assert good["server"]["unit_path"] == "/etc/systemd/system/sglang.service"
    assert good["server"]["env_path"] == "/etc/sglang/sglang.env"
    assert good["server"]["argv"][:3] == [good["release"]["venv"] + "/bin/python", "-m", "emulator"]
    assert "--speculative-num-steps" in good["server"]["argv"]
    assert good["server"]["argv"][good["server"]["argv"].index("--tp-size") + 1] == "2"
    assert good["server"]["local_url"] == "http://127.0.0.1:30000"
    assert good["topology"]["enabled"] is False and good["topology"]["node_rank"] == 0
    assert good["server"]["ready_paths"] == ["/health_generate"]
    assert [c["case"] for c in good["gate"]["cases"]] == ["coding", "long_context", "concurrent", "prose",
                                                          "thinking", "answers", "tool_calls", "reasoning",
                                                          "agreement", "pressure"]
    assert good["gate"]["identity"]["profile"] == good["profile"]
    # the local inventory names its stand-in
    assert good["gate"]["nvidia_smi"] == "/usr/local/lib/sglang-test/nvidia-smi"
    assert len(good["gate"]["identity"]["profile_sha256"]) == 12
    assert good["gate"]["cases"][0]["thresholds"] == {"min_tok_s": 45, "min_accept_len": 2.8}
    assert good["gate"]["text"].startswith("gate plan, each threshold judged on its 95% interval")
    assert good["server"]["exposure"] == {"problems": [], "host": "127.0.0.1", "api_key": False,
                                "allowed_networks": [], "open_network": False}
    assert good["gpu"]["memory"] and all("GiB" in line for line in good["gpu"]["memory"])
    assert good["server"]["state_dir"] == "/var/lib/sglang" and good["server"]["user"] == "sglang"


def _plan_paths():
    """Every path into the plan the roles, playbooks and Molecule read (sglang_deploy_plan.a.b)."""
    found = set()
    for folder in ("roles", "playbooks", "molecule", "tests/playbooks"):
        for f in (ROOT / folder).rglob("*"):
            if f.suffix in (".yml", ".j2") and f.is_file():
                text = f.read_text()
                found.update(m.group(1) for m in re.finditer(r"\bsglang_deploy_plan((?:\.[a-z_]+)+)", text))
    return sorted(p.lstrip(".") for p in found if p != ".py")  # .py: the action plugin's file name


def test_every_path_the_roles_read_is_a_field_of_the_plans_parts(good):
    """The roles read the plan by part (parts.py), never a renamed copy: a path into a part that
    has no such field (a typo, a field renamed in Python only) fails here, not on a host."""
    from sglang_perf.plan import parts
    paths = _plan_paths()
    assert len(paths) > 40, paths
    typed = {f.name: f.type for f in dataclasses.fields(parts.Plan)}
    by_part = {"release": parts.Release, "model": parts.Model, "gpu": parts.Gpu, "server": parts.Server,
               "lock": parts.Lock, "gate": parts.Gate, "watch": parts.Watch}
    wrong = []
    for path in paths:
        head, _, rest = path.partition(".")
        if head not in typed and head != "preflight":  # preflight: the action's flag on the fact
            wrong.append(path)
        elif head in by_part and rest:
            field = rest.split(".")[0]
            if field not in {f.name for f in dataclasses.fields(by_part[head])}:
                wrong.append(path)
    assert wrong == [], "paths into the plan that its parts do not have: %s" % wrong
    # and the fact carries each part whole, as the dataclass has it
    for name, part in by_part.items():
        if name != "watch":
            assert set(good[name]) == {f.name for f in dataclasses.fields(part)}, name
    # no role variable is a copy of a part's field
    for f in (ROOT / "roles").glob("*/vars/main.yml"):
        copies = [line for line in f.read_text().splitlines()
                  if re.search(r'^[^#].*"\{\{ sglang_deploy_plan\.[a-z_.]+ \}\}"$', line)]
        assert copies == [], "%s renames the plan's fields: %s" % (f, copies)


def test_the_gate_names_the_corpus_the_role_copies_and_where_the_module_reads_it(good):
    """AnsiballZ ships no data file: the role copies the controller's corpus (the one the plan
    checked the long-context cases against) to the state directory, the module reads it there."""
    from sglang_perf.measure import corpus
    assert good["gate"]["corpus_path"] == "/var/lib/sglang/corpus.json"
    assert good["gate"]["corpus_source"] == corpus.DEFAULT_PATH
    assert good["gate"]["corpus_source"] == str(ROOT / "plugins/module_utils/sglang_perf/measure/corpus.json")
    moved = plan_for({"sglang_state_dir": "/srv/sglang-state"}, plumbing=False)
    assert moved["problems"] == [] and moved["gate"]["corpus_path"] == "/srv/sglang-state/corpus.json"
    assert "corpus_path" not in plan_for(roles=("nvidia_gpu", "sglang")).get("gate", {})


def test_the_release_name_follows_every_input_and_only_them(good):
    name = good["release"]["name"]
    assert plan_for(plumbing=False)["release"]["name"] == name  # the same inputs, the same name
    assert plan_for({"sglang_pip_packages": ["aiohttp==3.14.5"]})["release"]["name"] != name
    wheel = str(ROOT / "dist" / "sglang_emulator-0.5.24-py3-none-any.whl")
    assert plan_for({"sglang_pip_local_files": [wheel]})["release"]["name"] != good["release"]["name"]
    assert plan_for({"sglang_api_key": KEY})["release"]["name"] == good["release"]["name"]


def test_the_local_inventorys_wheel_is_named_by_the_releases_engine_and_version(good):
    """{engine} and {version} in sglang_pip_local_files are the plan's: one inventory line gives
    each engine its own emulator wheel, and the inputs never name a derived variable."""
    dist = ROOT / "dist"
    assert good["release"]["inputs"]["wheels"][0]["path"] == \
        str(ROOT / "inventories" / "local" / "../../dist/sglang_emulator-0.5.23-py3-none-any.whl")
    vllm = plan_for({"sglang_profile": "vllm_mtp_3"})
    wheel = vllm["release"]["inputs"]["wheels"][0]
    assert wheel["path"].endswith("/dist/vllm_emulator-0.33.0-py3-none-any.whl")
    assert wheel["sha256"] and vllm["release"]["name"].startswith("vllm-0.33.0-")
    bumped = plan_for({"sglang_version": "0.5.24",
                       "sglang_cuda_runtime": "13.0"})
    assert bumped["release"]["inputs"]["wheels"][0]["path"].endswith(
        "sglang_emulator-0.5.24-py3-none-any.whl")
    gone = plan_for({"sglang_pip_local_files": [str(dist / "{engine}-{version}-missing.whl")]})
    assert "sglang_pip_local_files: not on the controller: %s/sglang-0.5.23-missing.whl" % dist \
        in "; ".join(gone["problems"])


def test_a_render_without_a_lock_file_names_the_release_unlocked():
    plan = plan_for({"sglang_pip_constraints": "/nonexistent/lock.txt"}, review=True)
    assert plan["problems"] == [] and plan["release"]["name"] == "0.5.23-unlocked"
    refused = plan_for({"sglang_pip_constraints": "/nonexistent/lock.txt"})
    assert "sglang_pip_constraints: no lock file at /nonexistent/lock.txt for sglang 0.5.23" in \
        refused["problems"][0]


def test_a_vllm_profile_plans_vllm():
    plan = plan_for({"sglang_profile": "vllm_mtp_3",
                     "sglang_gate_thresholds": {"vllm_mtp_3": {"coding": {"min_tok_s": 36},
                                                               "long_context": {}, "concurrent": {}}}})
    assert plan["problems"] == [], plan["problems"]
    assert plan["release"]["engine"] == "vllm" and plan["release"]["version"] == "0.33.0"
    assert plan["release"]["name"].startswith("vllm-0.33.0-")
    assert plan["release"]["launch_module"] == "emulator.vllm"
    assert plan["server"]["ready_paths"] == ["/health", "/v1/models"]


def test_no_secret_enters_the_plan():
    plan = plan_for({"sglang_api_key": KEY, "sglang_hf_token": TOKEN, "sglang_host": "0.0.0.0"})
    assert plan["problems"] == []
    text = json.dumps(plan, default=str)
    assert KEY not in text and TOKEN not in text
    assert plan["server"]["exposure"]["api_key"] is True
    argv = plan["server"]["argv"]
    assert argv[argv.index("--config") + 1] == plan["server"]["secrets_path"]


def test_a_secret_refused_is_not_echoed():
    plan = plan_for({"sglang_api_key": "short key"})
    assert "sglang_api_key = (hidden) is not valid" in plan["problems"][0]
    assert "short key" not in json.dumps(plan, default=str)


def test_the_production_host_plans_from_its_vault_variables():
    plan = plan_for({"vault_sglang_api_key": KEY}, host="ct129", inventory=PRODUCTION)
    assert plan["problems"] == [], plan["problems"]
    assert plan["release"]["launch_module"] == "sglang.launch_server"
    assert plan["server"]["exposure"]["api_key"]
    assert KEY not in json.dumps(plan, default=str)


def test_a_role_alone_plans_its_own_inputs_only():
    gpu = plan_for({"sglang_port": 70000}, roles=["nvidia_gpu"])
    assert gpu["problems"] == [] and gpu["roles"] == ["nvidia_gpu"] and "argv" not in gpu
    sglang = plan_for({"sglang_gate_warmup": -1}, roles=["sglang"])
    assert sglang["problems"] == [] and "gate" not in sglang


def test_a_profile_override_plans_that_profile():
    """playbooks/compare.yml plans each compared profile (sglang_profile as an include's var)."""
    plan = plan_for({"sglang_profile": "nextn_1step"}, roles=["sglang"])
    assert plan["problems"] == [] and plan["profile"] == "nextn_1step"
    assert plan["server"]["argv"][plan["server"]["argv"].index("--speculative-num-steps") + 1] == "1"


def test_a_multinode_pair_plans_each_rank(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"children": {"sglang_servers": {"children": {"qwen_pair": {
        "hosts": {"node-a": {"sglang_node_address": "10.0.0.1"}, "node-b": {}},
        "vars": {"sglang_multinode_group": "qwen_pair", "sglang_profiles": {"pair": dict(P3, tp_size=4)},
                 "sglang_profile": "pair", "sglang_hardware": None, "nvidia_gpu_allow_absent": True,
                 "sglang_gate_thresholds": {"pair": {"coding": {"min_tok_s": 45}}}}}}}}}}))
    plans = [plan_for(host=h, inventory=inventory) for h in ("node-a", "node-b")]
    for rank, plan in enumerate(plans):
        assert plan["problems"] == [], plan["problems"]
        topo = plan["topology"]
        assert topo["enabled"] and topo["nnodes"] == 2 and topo["node_rank"] == rank
        assert topo["rank0"] == "node-a"
        argv = plan["server"]["argv"]
        assert argv[argv.index("--node-rank") + 1] == str(rank)
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:20000"
    missing = plan_for(host="node-a", inventory=inventory, play_hosts=["node-a"])
    assert "node-b" in "; ".join(missing["problems"])


def test_the_plan_names_the_drafter_the_model_step_judges(good):
    assert good["model"]["drafter"] is None  # nextn_3step: the model's own MTP head
    dflash = plan_for({"sglang_profile": "dflash"}, plumbing=False)
    assert dflash["problems"] == []
    assert dflash["model"]["drafter"] == {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main",
                                 "path": "/srv/models/Qwen3.6-27B-DFlash", "download": True, "block": 16}
    # vLLM's block: num_speculative_tokens 15 + the token the drafter anchors on
    assert plan_for({"sglang_profile": "vllm_dflash"}, plumbing=False)["model"]["drafter"]["block"] == 16
    # what the gate's fingerprint reads the commits of: the model where it is loaded, the drafter
    assert dflash["gate"]["identity"]["model"] == {"repo": "Qwen/Qwen3.6-27B", "revision": "main",
                                                   "path": dflash["model"]["load_path"]}
    assert dflash["gate"]["identity"]["drafter"] == dflash["model"]["drafter"]
    assert dflash["server"]["argv"][dflash["server"]["argv"].index("--speculative-draft-model-path") + 1] == \
        dflash["model"]["drafter"]["path"]


def test_every_default_profile_plans_on_the_local_inventory_with_the_production_gate():
    """Every speculative profile plans (the drafters' roofline counts their block); the two without
    speculation are refused by the roofline, as tests/test_capacity.py shows."""
    from conftest import role_defaults
    for name, p in role_defaults()["sglang_profiles"].items():
        problems = plan_for({"sglang_profile": name}, plumbing=False)["problems"]
        if p.get("speculative_algorithm"):
            assert problems == [], name
        else:
            assert problems and all("cannot be reached by profile %s" % name in e for e in problems), name
