"""Inputs and internals told apart by their names (the rule in docs/layout.md#names, which each
role's defaults/main.yml points to): a name without a leading underscore is an input - a role's
(defaults/main.yml, meta/argument_specs.yml, tests/test_playbooks.py compares the two) or a
playbook's; `_name` is derived (a role's vars/main.yml, play and task vars), `__name` is a run's
result (register, set_fact). And the inventories say only what differs from the roles' defaults,
the host's GPU count once."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ansiblerun import ansible
from conftest import ROOT, role_defaults, yaml_strings
from planutil import PRODUCTION, plan_for

ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "defaults" / "main.yml").exists())
TASK_FILES = sorted(
    [p for role in ROLES for d in ("tasks", "handlers") for p in (ROOT / "roles" / role / d).glob("*.yml")]
    + [ROOT / "deploy.yml"] + list((ROOT / "playbooks").glob("*.yml"))
    + list((ROOT / "playbooks" / "tasks").glob("*.yml")))
# Inputs set on purpose by a set_fact, with the reason.
SET_ON_PURPOSE = {
    # the winner of the comparison becomes the profile the gated deploy after it installs
    ("playbooks/compare.yml", "sglang_profile"),
}
# Inputs of the playbooks that no play declares in its vars (they are given with -e; the
# candidates' way to the host, playbooks/vars/candidates.yml, in the inventory too).
PLAYBOOK_INPUTS = {"render_dir", "bench_report_dir", "sglang_deploy_hosts", "tune_exec", "tune_exec_shell",
                   "tune_url", "tune_runner_prefix", "tune_nvidia_smi"}


def load(path):
    return yaml.safe_load(Path(path).read_text())


def options(role):
    return load(ROOT / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]


def role_inputs():
    return {name for role in ROLES for name in options(role)}


def walk(node, found):
    """(kind, name) of every register, set_fact key and task/play vars key under ``node``."""
    if isinstance(node, list):
        for item in node:
            walk(item, found)
    elif isinstance(node, dict):
        if isinstance(node.get("register"), str):
            found.append(("register", node["register"]))
        for key in ("ansible.builtin.set_fact", "set_fact"):
            if isinstance(node.get(key), dict):
                found += [("set_fact", k) for k in node[key] if k != "cacheable"]
        if isinstance(node.get("vars"), dict):
            kind = "play vars" if "hosts" in node else "task vars"
            found += [(kind, k) for k in node["vars"]]
        for value in node.values():
            walk(value, found)
    return found


def names(kinds):
    return [(path.relative_to(ROOT).as_posix(), kind, name) for path in TASK_FILES
            for kind, name in walk(load(path), []) if kind in kinds]


def playbook_inputs():
    """What the playbooks' users may set: their plays' vars and playbooks/vars without a leading
    underscore, and PLAYBOOK_INPUTS."""
    declared = {name for _, _, name in names({"play vars"})}
    for path in (ROOT / "playbooks" / "vars").glob("*.yml"):
        declared |= set(load(path) or {})
    return {n for n in declared if not n.startswith("_")} | PLAYBOOK_INPUTS


def test_registered_results_and_facts_are_double_underscored():
    found = names({"register", "set_fact"})
    assert len(found) > 60  # the scan sees the roles' and playbooks' tasks
    wrong = [f for f in found if not f[2].startswith("__") and (f[0], f[2]) not in SET_ON_PURPOSE]
    assert wrong == [], "register/set_fact without the __ prefix: %s" % wrong
    for path, name in SET_ON_PURPOSE:  # each exception is still needed, and is an input
        assert (path, "set_fact", name) in found and name in role_inputs() | playbook_inputs()


def test_task_vars_are_derived_or_inputs():
    """A task's or block's vars either compute an internal (`_name`) or pass an input on."""
    inputs = role_inputs() | playbook_inputs()
    found = names({"task vars"})
    wrong = [f for f in found if not f[2].startswith("_") and f[2] not in inputs]
    assert wrong == [], "task vars that are neither _-prefixed nor an input: %s" % wrong
    assert [f for f in found if f[2].startswith("__")] == [], "__ is for a run's results"


@pytest.mark.parametrize("role", ROLES)
def test_role_vars_are_internal_and_never_inputs(role):
    path = ROOT / "roles" / role / "vars" / "main.yml"
    derived = set(load(path) or {}) if path.exists() else set()
    assert [n for n in derived if not n.startswith("_") or n.startswith("__")] == []
    inputs = role_inputs() | {n for r in ROLES for n in role_defaults(r)}
    assert derived & inputs == set()
    assert [n for n in options(role) if n.startswith("_")] == [], "an internal in argument_specs"


def group_vars_files():
    return sorted(p for inv in ("local", "production")
                  for p in (ROOT / "inventories" / inv / "group_vars").rglob("*.yml")
                  if "vault" not in p.name)


def test_inventories_state_only_what_differs_from_the_role_defaults():
    """A group_vars value equal to a role default (plain YAML; a templated value compares as its
    text) is a restatement: the role's default is the one statement."""
    every_default = {}
    for role in ROLES:
        every_default.update(role_defaults(role))
    files = group_vars_files()
    assert len(files) == 2
    restated = [(f.relative_to(ROOT).as_posix(), name)
                for f in files for name, value in (load(f) or {}).items()
                if name in every_default and value == every_default[name]]
    assert restated == [], "group_vars restating a role default: %s" % restated


def test_the_gpu_count_is_said_once_in_sglang_hardware():
    """sglang_hardware.gpu_count is the host's GPU count: the sglang role's tp_size check, the
    roofline and the memory preflight read it, and each inventory's nvidia_gpu_expected_count is
    derived from it. No other variable states a GPU count."""
    for role in ROLES:
        assert [n for n in options(role) if "gpu_count" in n] == []
    for f in group_vars_files():
        data = load(f)
        count = data["sglang_hardware"]["gpu_count"]
        assert isinstance(count, int) and count >= 1, f
        assert data["nvidia_gpu_expected_count"] == "{{ sglang_hardware.gpu_count }}", f
        assert [n for n in data if "gpu_count" in n] == [], f
    # Ansible resolves the derived count from the source
    p = ansible("ansible", "ct129", "-i", "inventories/production/hosts.yml", "-m", "ansible.builtin.debug",
                "-a", "var=nvidia_gpu_expected_count", "-e", '{"sglang_hardware": {"gpu_count": 4}}',
                timeout=120)
    assert p.returncode == 0 and re.search(r'nvidia_gpu_expected_count"?: 4\b', p.stdout), p.stdout + p.stderr


def test_the_tp_size_check_names_sglang_hardware():
    """The production host's plan (playbooks/render.yml refused the same before the plan)."""
    plan = plan_for({"vault_sglang_api_key": "k" * 32, "sglang_hardware": {
        "gpu_count": 1, "gpu_bandwidth_gbs": 768, "gpu_memory_gib": 96}}, host="ct129", inventory=PRODUCTION,
        review=True)
    assert ("sglang_profiles.nextn_3step.tp_size (2) exceeds the GPUs the host is expected to have "
            "(sglang_hardware.gpu_count = 1)") in "; ".join(plan["problems"])


@pytest.mark.parametrize("role", ROLES)
def test_no_default_references_a_derived_name_or_the_plan(role):
    """Inputs never reference derived names: a default ('' or [] where the plan computes the value)
    templates only other inputs, never an internal (`_name`) or the deploy plan it feeds."""
    texts = {"defaults": (ROOT / "roles" / role / "defaults" / "main.yml").read_text(),
             "argument_specs": yaml.safe_dump(
                 {n: o.get("default") for n, o in options(role).items() if "default" in o})}
    for where, text in texts.items():
        found = [m.group(0) for expr in re.findall(r"\{\{(.*?)\}\}", text, re.S)
                 for m in re.finditer(r"(?<![\w.])(_\w+|sglang_deploy_plan)\b", expr)]
        assert found == [], "%s/%s references %s" % (role, where, found)


@pytest.mark.parametrize("path", ["inventories/local/group_vars/sglang_servers.yml",
                                  "inventories/production/group_vars/sglang_servers/main.yml",
                                  ".config/molecule/config.yml"])
def test_no_inventory_input_references_a_derived_name_or_the_plan(path):
    """The inventories' inputs (and Molecule's host variables) template only other inputs; a wheel
    per engine is named with the plan's {engine} and {version} placeholders."""
    text = (ROOT / path).read_text()
    found = [m.group(0) for expr in re.findall(r"\{\{(.*?)\}\}", text, re.S)
             for m in re.finditer(r"(?<![\w.])(_\w+|sglang_deploy_plan)\b", expr)]
    assert found == [], "%s references %s" % (path, found)


@pytest.mark.parametrize("path", sorted((ROOT / "playbooks").glob("*.yml")), ids=lambda p: p.name)
def test_no_play_names_a_profile(path):
    """Which profiles a play launches is role data (e.g. sglang_gate_sweep_profiles): a play's
    vars outrank the inventory's, so a list kept there could not be a host's own."""
    names = set(role_defaults()["sglang_profiles"])
    for play in yaml.safe_load(path.read_text()) or []:
        named = sorted(names.intersection(yaml_strings(play.get("vars") or {})))
        assert not named, "%s: play %r names profiles %s in its vars" % (path.name, play.get("name"), named)
