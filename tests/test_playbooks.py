"""Static checks of the Ansible side: every playbook's syntax with every inventory, ansible-lint's
production profile, yamllint, argument_specs vs defaults, and render.yml's units."""
from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from ansiblerun import ansible
from conftest import PRODUCTION_VAULT, ROOT

PLAYBOOKS = ["deploy.yml"] + sorted("playbooks/" + p.name for p in (ROOT / "playbooks").glob("*.yml"))
INVENTORIES = ["inventories/local", "inventories/production"]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "defaults" / "main.yml").exists())


@pytest.mark.parametrize("inventory", INVENTORIES)
def test_syntax(inventory):
    # every playbook in one run (an error names its file): one Ansible start, not one a playbook
    p = ansible("ansible-playbook", "--syntax-check", "-i", inventory, *PLAYBOOKS)
    assert p.returncode == 0, p.stdout + p.stderr
    assert [ln.split(": ", 1)[1] for ln in p.stdout.splitlines() if ln.startswith("playbook: ")] == PLAYBOOKS


def test_ansible_lint_production_profile_no_skips():
    config = yaml.safe_load((ROOT / ".ansible-lint").read_text())
    assert config["profile"] == "production"
    assert not config.get("skip_list") and not config.get("warn_list")
    noqa = subprocess.run(["grep", "-rn", "noqa", "roles", "playbooks", "deploy.yml",
                           "inventories"], cwd=str(ROOT), capture_output=True, text=True)
    assert noqa.stdout == "", "inline skips: " + noqa.stdout
    p = ansible("ansible-lint")
    assert p.returncode == 0, p.stdout + p.stderr


def test_yamllint():
    p = ansible("yamllint", "--strict", ".")
    assert p.returncode == 0, p.stdout + p.stderr


# The fact plugins/action/sglang_deploy_plan.py sets; sglang_gate declares it as its input.
PLAN_FACT = "sglang_deploy_plan"


@pytest.mark.parametrize("role", ROLES)
def test_argument_specs_match_defaults(role):
    """The specs list exactly the role's inputs: every default with the same default value, and
    the required inputs without one (tests/test_role_vars.py: no internal among them). The one
    input named otherwise is the deploy plan (PLAN_FACT), which the gate reads."""
    defaults = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    spec = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    options = spec["argument_specs"]["main"]["options"]
    required = {name for name, opt in options.items() if opt.get("required")}
    assert set(defaults) | required == set(options), "only in defaults: %s; only in specs: %s" % (
        sorted(set(defaults) - set(options)), sorted(set(options) - set(defaults) - required))
    assert set(defaults) & required == set(), "a required input has no default"
    for name, opt in options.items():
        assert opt.get("description"), name
        assert name.startswith(role + "_") or name == PLAN_FACT, "%s is not prefixed with the role" % name
        if name in required:
            assert "default" not in opt, name
        else:
            assert opt.get("default") == defaults[name], name


def test_render_writes_every_hosts_unit_without_contacting_it(tmp_path):
    out = tmp_path / "units"
    for inventory in INVENTORIES:
        # an unreachable connection proves no host is contacted
        vault = ["-e", PRODUCTION_VAULT] if inventory == "inventories/production" else []
        p = ansible("ansible-playbook", "-i", inventory, "playbooks/render.yml",
                    "-e", "render_dir=%s" % out, *vault)
        assert p.returncode == 0, p.stdout + p.stderr
    prod = (out / "ct129.service").read_text()
    # the unit runs the release it names: /opt/sglang/releases/<version>-<checksum>/venv
    release = re.search(r"^# Profile nextn_3step, SGLang 0\.5\.23, release (0\.5\.23-[0-9a-f]{10}) "
                        r"\(/opt/sglang/releases/\1\)\.$", prod, re.M).group(1)
    assert ("ExecStart=/opt/sglang/releases/%s/venv/bin/python -m sglang.launch_server "
            "--speculative-algorithm NEXTN --speculative-num-steps 3 --speculative-eagle-topk 1 "
            "--speculative-num-draft-tokens 4 --tp-size 2 --mem-fraction-static 0.88 "
            "--context-length 131072 --max-running-requests 16 --mamba-full-memory-ratio 0.5 "
            "--mamba-radix-cache-strategy extra_buffer_lazy --reasoning-parser qwen3 "
            "--tool-call-parser qwen3_coder --model-path /srv/models/Qwen3.6-27B "
            "--served-model-name Qwen3.6-27B --host 0.0.0.0 --port 30000 --trust-remote-code "
            "--enable-metrics --config /etc/sglang/sglang-secrets.yaml\n" % release) in prod
    assert "test-only-production-key" not in prod
    assert "TimeoutStartSec=1800" in prod and "Restart=on-failure" in prod
    assert "After=network-online.target" in prod and "User=sglang" in prod
    local = (out / "ct-local.service").read_text()
    assert "-m emulator --speculative-algorithm NEXTN" in local
    # only the release (the emulator's wheel and lock instead of SGLang's), the launched module and
    # the container's limits differ from production
    differ = [(a, b) for a, b in zip(prod.splitlines(), local.splitlines()) if a != b]
    assert [a.split("=")[0].split(",")[0] for a, _ in differ] == [
        "# Profile nextn_3step", "ExecStart", "LimitNOFILE"], differ
    assert re.search(r"release (0\.5\.23-[0-9a-f]{10}) ", differ[0][1]).group(1) != release


def test_render_an_older_sglang_uses_the_old_mamba_flag(tmp_path):
    p = ansible("ansible-playbook", "-i", "inventories/production", "playbooks/render.yml",
                "-e", "render_dir=%s" % tmp_path, "-e", PRODUCTION_VAULT, "-e", "sglang_version=0.5.12")
    assert p.returncode == 0, p.stdout + p.stderr
    unit = (tmp_path / "ct129.service").read_text()
    assert "--mamba-scheduler-strategy extra_buffer" in unit and "radix" not in unit


@pytest.mark.parametrize("extra, words", [
    (["-e", "sglang_profile=nextn_9step"], "sglang_profile: 'nextn_9step' is not defined in "
                                           "sglang_profiles"),
    (["-e", '{"sglang_profiles": {"p": {"speculative_algorithm": "NEXTN", '
            '"speculative_num_draft_tokens": 4}}, "sglang_profile": "p"}'],
     "speculative_algorithm NEXTN needs sglang_profiles.p.speculative_num_steps"),
    (["-e", '{"sglang_profiles": {"p": {"tp_size": 4}}, "sglang_profile": "p"}'],
     "sglang_profiles.p.tp_size (4) exceeds the GPUs the host is expected to have "
     "(sglang_hardware.gpu_count = 2)"),
    (["-e", '{"sglang_api_key": ""}'], "ct129: sglang_host = 0.0.0.0 binds beyond loopback"),
])
def test_render_refuses_bad_profiles_naming_the_variable(tmp_path, extra, words):
    p = ansible("ansible-playbook", "-i", "inventories/production", "playbooks/render.yml",
                "-e", "render_dir=%s" % tmp_path, "-e", PRODUCTION_VAULT, *extra)
    assert p.returncode != 0 and words in " ".join((p.stdout + p.stderr).split())
    assert not list(tmp_path.glob("*.service"))


def test_production_without_its_vault_file_is_refused_naming_the_vault_variable(tmp_path):
    p = ansible("ansible-playbook", "-i", "inventories/production", "playbooks/render.yml",
                "-e", "render_dir=%s" % tmp_path)
    out = " ".join((p.stdout + p.stderr).split())
    assert p.returncode != 0
    assert "vault_sglang_api_key is not set: create the vault file " \
           "inventories/production/group_vars/sglang_servers/vault.yml with ansible-vault" in out
    assert not list(tmp_path.glob("*.service"))


def test_firewall_table_admits_only_the_listed_networks(tmp_path):
    p = ansible("ansible-playbook", "tests/playbooks/firewall.yml", "-e", "render_dir=%s" % tmp_path,
                "-e", '{"sglang_allowed_networks": ["10.1.230.0/24", "fd00::/8"], "sglang_port": 30000}')
    assert p.returncode == 0, p.stdout + p.stderr
    nft = (tmp_path / "sglang-firewall.nft").read_text()
    rules = [ln.strip() for ln in nft.splitlines() if "dport" in ln]
    assert rules == ['tcp dport 30000 iif "lo" accept',
                     "tcp dport 30000 ip saddr 10.1.230.0/24 accept",
                     "tcp dport 30000 ip6 saddr fd00::/8 accept",
                     "tcp dport 30000 drop"]
