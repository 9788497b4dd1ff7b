"""molecule/scenarios.yml and scripts/molecule_changed.py: the mapping from changed files to the
Molecule scenarios that exercise them (`make molecule-changed`, the GitHub workflow's matrix)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from scripts import molecule_changed as mc

SCENARIOS, NOT_EXERCISED = mc.load(scenario_dirs=mc.scenario_dirs())
TRACKED = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=str(ROOT),
                         capture_output=True, text=True, check=True).stdout.split()
DEPLOY = {"deploy_rollback", "brownfield", "fleet_canary", "multinode", "engine_switch"}
ALL = set(SCENARIOS)


@pytest.mark.parametrize("pattern, path, hit", [
    ("roles/**", "roles/sglang/tasks/main.yml", True),
    ("roles/**", "roles", False),
    ("roles/*", "roles/sglang/tasks/main.yml", False),
    ("plugins/filter/*.py", "plugins/filter/redact.py", True),
    ("plugins/filter/*.py", "plugins/filter/sub/redact.py", False),
    ("molecule/**/test_*.py", "molecule/sglang/tests/test_sglang.py", True),
    ("molecule/**/test_*.py", "molecule/test_x.py", True),
    ("ansible.cfg", "ansible.cfg.bak", False),
    ("a?c", "a/c", False),
])
def test_pattern_semantics(pattern, path, hit):
    assert mc.matches(pattern, path) is hit


def test_every_scenario_directory_is_mapped_and_nothing_else():
    assert set(SCENARIOS) == set(mc.scenario_dirs()) and len(SCENARIOS) >= 6


def test_every_pattern_matches_a_file():
    patterns = {p for ps in SCENARIOS.values() for p in ps} | {e["path"] for e in NOT_EXERCISED}
    dead = sorted(p for p in patterns if not any(mc.matches(p, f) for f in TRACKED))
    assert not dead, "patterns in molecule/scenarios.yml that match no file: %s" % dead


def test_every_ansible_file_is_exercised_or_says_where_it_is_tested():
    exercised = {f for ps in SCENARIOS.values() for f in TRACKED if any(mc.matches(p, f) for p in ps)}
    listed = {f for e in NOT_EXERCISED for f in TRACKED if mc.matches(e["path"], f)}
    ansible = [f for f in TRACKED if f.split("/")[0] in ("roles", "plugins", "playbooks", "inventories")]
    orphans = sorted(f for f in ansible if f not in exercised | listed)
    assert not orphans, "neither mapped to a scenario nor listed in not_exercised: %s" % orphans
    both = sorted(exercised & listed)
    assert not both, "listed as not exercised, but a scenario runs them: %s" % both


@pytest.mark.parametrize("changed, expected", [
    (["roles/nvidia_gpu/tasks/verify.yml"], {"nvidia_gpu"} | DEPLOY),
    (["plugins/filter/nvidia_smi.py"], {"nvidia_gpu"} | DEPLOY),
    (["roles/sglang/templates/sglang.service.j2"], {"sglang"} | DEPLOY),
    (["roles/sglang_gate/tasks/decide.yml"], DEPLOY),
    (["plugins/module_utils/sglang_perf/measure/engine.py"], DEPLOY),
    (["emulator/server.py"], {"sglang"} | DEPLOY),
    (["inventories/local/group_vars/sglang_servers.yml"], {"sglang"} | DEPLOY),
    (["molecule/multinode/converge.yml"], {"multinode"}),
    (["molecule/sglang/side_effect.yml"], {"sglang"}),
    ([".config/molecule/config.yml"], ALL),
    (["requirements.txt"], ALL),
    (["inventories/production/group_vars/sglang_servers/main.yml"], set()),
    (["README.md", "tests/test_filter.py", "bench/cli.py"], set()),
    (["playbooks/drift.yml"], set()),
    ([], set()),
])
def test_changes_select_the_scenarios_that_run_them(changed, expected):
    assert set(mc.select(SCENARIOS, changed)) == expected


def test_select_says_which_file_chose_each_scenario():
    chosen = mc.select(SCENARIOS, ["README.md", "roles/nvidia_gpu/defaults/main.yml",
                                   "molecule/nvidia_gpu/prepare.yml"])
    assert chosen["nvidia_gpu"] == ["roles/nvidia_gpu/defaults/main.yml", "molecule/nvidia_gpu/prepare.yml"]
    assert chosen["deploy_rollback"] == ["roles/nvidia_gpu/defaults/main.yml"]


@pytest.mark.parametrize("text, words", [
    ("scenarios: {a: {use: [nope]}}", "scenario a uses group 'nope', which is not defined"),
    ("scenarios: {a: {path: [x]}}", "scenario a: unknown keys path (use, paths)"),
    ("scenario: {}", "needs a 'scenarios' mapping"),
    ("scenarios: {a: {}}\nextras: 1", "unknown top-level keys extras"),
    ("scenarios: {a: {}}\nnot_exercised: [{path: x}]", "needs a path and a why"),
    ("scenarios: {a: {}}", "not mapped: b; no such scenario: a"),
])
def test_bad_mappings_are_refused_by_name(tmp_path, text, words):
    f = tmp_path / "scenarios.yml"
    f.write_text(text)
    with pytest.raises(mc.MappingError) as e:
        mc.load(f, scenario_dirs=["b"])
    assert words in str(e.value)


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=str(cwd),
                   check=True, capture_output=True)


def test_changed_files_are_commits_edits_deletions_and_untracked_files(tmp_path):
    _git(tmp_path, "init", "-q")
    for name in ("kept", "edited", "deleted", "committed"):
        (tmp_path / name).write_text("v1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "base")
    _git(tmp_path, "tag", "base")
    (tmp_path / "committed").write_text("v2\n")
    _git(tmp_path, "commit", "-qam", "later")
    (tmp_path / "edited").write_text("v2\n")
    (tmp_path / "deleted").unlink()
    (tmp_path / "new").write_text("v1\n")
    assert mc.changed_files("base", cwd=tmp_path) == ["committed", "deleted", "edited", "new"]
    assert mc.changed_files("HEAD", cwd=tmp_path) == ["deleted", "edited", "new"]
    with pytest.raises(mc.MappingError, match="'v9' is not a commit git knows here"):
        mc.changed_files("v9", cwd=tmp_path)


def test_cli_prints_names_json_and_reasons():
    run = [sys.executable, str(ROOT / "scripts" / "molecule_changed.py")]
    p = subprocess.run(run + ["--json", "roles/nvidia_gpu/tasks/main.yml"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert set(json.loads(p.stdout)) == {"nvidia_gpu"} | DEPLOY
    assert "nvidia_gpu <- roles/nvidia_gpu/tasks/main.yml" in p.stderr
    p = subprocess.run(run + ["README.md"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == ""
    assert "no Molecule scenario exercises them" in p.stderr
    p = subprocess.run(run + ["--base", "no-such-ref"], capture_output=True, text=True)
    assert p.returncode == 2 and "'no-such-ref' is not a commit git knows here" in p.stderr


def test_deploy_scenarios_run_the_plumbing_gate():
    gate = yaml.safe_load((ROOT / "tests" / "vars" / "plumbing_gate.yml").read_text())
    for name in sorted(mc.scenario_dirs()):
        config = yaml.safe_load((ROOT / "molecule" / name / "molecule.yml").read_text())
        host_vars = (config.get("provisioner") or {}).get("connection_options") or {}
        mine = {k: v for k, v in host_vars.items() if k.startswith("sglang_gate_")}
        if name in DEPLOY:
            assert mine == gate, name
        else:
            assert mine == {}, name
