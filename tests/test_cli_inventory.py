"""`bench gate`, `bench calibrate`, `bench run` and `bench compare --plan` with `-i INVENTORY
--host NAME`: the host's variables as ansible-playbook sees them (bench/planner.py: role
defaults, group_vars, host_vars, --vars on top, vaulted files skipped unless
--vault-password-file), against a temporary copy of inventories/production whose ct129 points at
an emulator on loopback."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from benchrun import bench
from conftest import ROOT

pytestmark = pytest.mark.timeout(300)

FAST = {"SGLEMU_SPEED_SCALE": "4"}
# a small plan: two judged cases of six requests, the role's coding bar
SMALL = {"sglang_gate_plan": {
    "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 64},
    "concurrent": {"prompts": "coding", "concurrency": 2, "requests": 6, "max_tokens": 64}},
    "sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": 45}, "concurrent": {}}},
    "sglang_gate_warmup": 1}
VAULT = ROOT / "inventories" / "production" / "vault.example.vault"
VAULT_KEY = "replace-with-a-long-random-key-0123456789"  # what the example vault holds
SKIPPED = "vaulted, skipped (give --vault-password-file FILE to read it)"


def inventory(tmp_path, port=None):
    """A copy of inventories/production; with ``port``, ct129's server is 127.0.0.1:port."""
    inv = tmp_path / "inv"
    shutil.copytree(ROOT / "inventories" / "production", inv)
    if port:
        write(inv / "host_vars" / "ct129" / "net.yml", {"ansible_host": "127.0.0.1", "sglang_port": port})
        # the emulator at FAST's speed scale: GPUs whose roofline admits what it serves (the plan
        # refuses a calibrated bar above the roofline)
        write(inv / "host_vars" / "ct129" / "emulated.yml", {"sglang_hardware": {
            "gpu_count": 2, "gpu_bandwidth_gbs": 4 * 768, "gpu_memory_gib": 48, "compute_capability": 8.6}})
    return inv


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def small(tmp_path):
    return write(tmp_path / "small.yml", SMALL)


def args(inv, host="ct129", vars=None, vault=None, **kw):
    return argparse.Namespace(inventory=None if inv is None else str(inv), host=host, vars=vars,
                              vault_password_file=vault, **kw)


def password_file(tmp_path):
    pw = tmp_path / "vault-pass"
    pw.write_text("sglang-deploy-example\n")  # the example vault's password (docs/security.md)
    return pw


# ------------------------------------------------------------------ against a server ------
def test_gate_judges_with_the_hosts_calibrated_thresholds(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    inv = inventory(tmp_path, emu.port)
    out = tmp_path / "r.json"
    # no --url: the host's own (ansible_host, sglang_port)
    p = bench("gate", "-i", inv, "--host", "ct129", "--vars", small(tmp_path), "--json", out, "--quiet")
    assert p.returncode == 0, p.stderr
    coding = next(c for c in json.loads(out.read_text())["cases"] if c["case"] == "coding")
    assert coding["thresholds"]["min_tok_s"] == 45  # sglang_gate_thresholds', no calibration yet
    # what playbooks/calibrate.yml writes for the host: an accept-length bar above what the server
    # gives (3.3) and under what 3 steps can reach (4.0: the plan refuses a bar beyond it)
    write(inv / "host_vars" / "ct129" / "gate_calibration.yml",
          {"sglang_gate_calibrated": {"nextn_3step": {"coding": {"min_accept_len": 3.95}}}})
    p = bench("gate", "-i", inv, "--host", "ct129", "--vars", small(tmp_path), "--quiet")
    assert p.returncode == 1, p.stderr
    assert "bench gate: gate failed (coding): coding: accept length" in p.stderr and "3.95" in p.stderr
    # a bar no server can reach is the plan's refusal, as the deploy's preflight says it (exit 2)
    write(inv / "host_vars" / "ct129" / "gate_calibration.yml",
          {"sglang_gate_calibrated": {"nextn_3step": {"coding": {"min_tok_s": 99999.0}}}})
    p = bench("gate", "-i", inv, "--host", "ct129", "--vars", small(tmp_path), "--quiet")
    assert p.returncode == 2 and "min_tok_s (99999.0) cannot be reached by profile nextn_3step" in p.stderr
    # the same server through --url and the default group_vars: no host_vars, it passes
    p = bench("gate", "--url", emu.url, "--vars", small(tmp_path), "--quiet")
    assert p.returncode == 0, p.stderr


def test_run_measures_the_host_with_its_own_url_and_size_figures(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    inv = inventory(tmp_path, emu.port)
    # the host's own hardware: a quarter of the bandwidth, so the roofline is a quarter as high
    write(inv / "host_vars" / "ct129" / "hw.yml",
          {"sglang_hardware": {"gpu_count": 2, "gpu_bandwidth_gbs": 192, "gpu_memory_gib": 48}})
    out, ref = tmp_path / "r.json", tmp_path / "ref.json"
    common = ("--requests", "6", "--max-tokens", "32", "--warmup", "1", "--quiet")
    p = bench("run", "-i", inv, "--host", "ct129", "--json", out, *common)
    assert p.returncode == 0, p.stderr
    p = bench("run", "--url", emu.url, "--json", ref, *common)  # the production inventory's server's sizes
    assert p.returncode == 0, p.stderr
    host, prod = (json.loads(f.read_text())["roofline"]["bandwidth_gbs"] for f in (out, ref))
    assert (host, prod) == (2 * 192, 2 * 768)
    # a host without the figures is named; --no-roofline measures it anyway
    (inv / "host_vars" / "ct129" / "hw.yml").write_text("sglang_hardware: {}\n")
    p = bench("run", "-i", inv, "--host", "ct129", *common)
    assert p.returncode == 2 and "host ct129 of %s sets no sglang_hardware" % inv in p.stderr, p.stderr
    assert bench("run", "-i", inv, "--host", "ct129", "--no-roofline", *common).returncode == 0
    p = bench("run", "--host", "ct129", *common)
    assert p.returncode == 2 and "give -i INVENTORY" in p.stderr, p.stderr


def test_calibrate_writes_where_the_playbook_does_and_gate_judges_with_it(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST)
    inv = inventory(tmp_path, emu.port)
    target = inv / "host_vars" / "ct129" / "gate_calibration.yml"
    # playbooks/calibrate.yml's file: <inventory_dir>/host_vars/<host>/gate_calibration.yml
    play_vars = yaml.safe_load((ROOT / "playbooks" / "calibrate.yml").read_text())[0]["vars"]
    assert (play_vars["calibrate_dir"], play_vars["calibrate_file"]) == (
        "{{ inventory_dir }}/host_vars", "{{ calibrate_dir }}/{{ inventory_hostname }}/gate_calibration.yml")
    write(target, {"sglang_gate_calibrated": {"no_spec": {"coding": {"min_tok_s": 20.0}}}})
    p = bench("calibrate", "-i", inv / "hosts.yml", "--host", "ct129", "--vars", small(tmp_path),
              "--runs", "2", "--margin", "0.4", "--write", "--quiet")
    assert p.returncode == 0, p.stderr
    assert "bench calibrate: wrote %s" % target in p.stderr
    assert p.stdout.startswith("--- %s (before)\n" % target), p.stdout
    text = target.read_text()
    assert "the gate plan ran 2 times on ct129" in text
    calibrated = yaml.safe_load(text)["sglang_gate_calibrated"]
    assert calibrated["no_spec"] == {"coding": {"min_tok_s": 20.0}}  # other profiles kept
    mine = calibrated["nextn_3step"]
    out = tmp_path / "r.json"
    p = bench("gate", "-i", inv / "hosts.yml", "--host", "ct129", "--vars", small(tmp_path),
              "--json", out, "--quiet")
    assert p.returncode == 0, p.stderr
    cases = {c["case"]: c for c in json.loads(out.read_text())["cases"]}
    for name in ("coding", "concurrent"):
        for key, value in mine[name].items():
            assert cases[name]["thresholds"][key] == value, (name, key)


def test_a_vaulted_api_key_is_read_only_with_the_vault_password(emulator, tmp_path):
    emu = emulator("nextn_3step", env=FAST, extra=["--api-key", VAULT_KEY])
    inv = inventory(tmp_path, emu.port)
    vault = inv / "group_vars" / "sglang_servers" / "vault.yml"
    shutil.copy(VAULT, vault)
    common = ("gate", "-i", inv / "hosts.yml", "--host", "ct129", "--vars", small(tmp_path), "--quiet")
    p = bench(*common)
    assert p.returncode == 2 and "authentication failed" in p.stderr, p.stderr
    assert "%s: %s" % (vault, SKIPPED) in p.stderr
    p = bench(*common, "--vault-password-file", password_file(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "vaulted, skipped" not in p.stderr and VAULT_KEY not in p.stderr + p.stdout


# ---------------------------------------------------------------------- the variables ------
def test_group_vars_host_vars_and_vars_files_layer_as_ansible_does(tmp_path):
    from bench import gate
    inv = inventory(tmp_path)
    write(inv / "group_vars" / "sglang_servers" / "gate.yml",
          {"sglang_gate_warmup": 3, "sglang_gate_confidence": 0.9, "sglang_gate_run_timeout": 100})
    write(inv / "host_vars" / "ct129.yml", {
        "sglang_gate_warmup": 5, "sglang_gate_stall_timeout": "{{ sglang_gate_warmup * 10 }}"})
    one = write(tmp_path / "one.yml", {"sglang_gate_confidence": 0.8, "sglang_gate_run_timeout": 200})
    two = write(tmp_path / "two.yml", {"sglang_gate_run_timeout": 300})
    keys = ("warmup", "confidence", "run_timeout")
    options = gate.plan_of(args(inv))["gate"]["options"]
    assert options["inconclusive"] == "fail"  # the role default, restated by neither
    assert [options[k] for k in keys] == [5, 0.9, 100]
    assert options["stall_timeout"] == 50  # templated by Ansible, with the host's warmup
    host = gate.host_of(args(inv, vars=[str(one), str(two)]))
    assert [host.planned()["gate"]["options"][k] for k in keys] == [5, 0.8, 300]
    assert host.planned()["profile"] == "nextn_3step"
    assert (host.name, host.vars["inventory_dir"]) == ("ct129", str(inv))
    assert gate.calibration_file(host) == inv / "host_vars" / "ct129" / "gate_calibration.yml"


def test_a_vaulted_group_vars_file_is_skipped_with_a_note_or_decrypted(tmp_path, capsys):
    from bench import gate, planner
    inv = inventory(tmp_path)
    vault = inv / "group_vars" / "sglang_servers" / "vault.yml"
    shutil.copy(VAULT, vault)
    host = gate.host_of(args(inv / "hosts.yml"))
    # production's sglang_api_key is the vault's, mandatory: not there, no key (the plan knows one is set)
    assert host.api_key() is None and host.planned()["server"]["exposure"]["api_key"] is True
    assert capsys.readouterr().err == "%s: %s\n" % (vault, SKIPPED)
    host = gate.host_of(args(inv / "hosts.yml", vault=str(password_file(tmp_path))))
    assert host.api_key() == VAULT_KEY and capsys.readouterr().err == ""
    bad = tmp_path / "wrong"
    bad.write_text("not-the-password\n")
    with pytest.raises(planner.PlanError, match="Decryption failed"):
        gate.host_of(args(inv / "hosts.yml", vault=str(bad)))


def test_the_hosts_url_is_ansible_host_at_sglang_port(tmp_path):
    from bench import gate, planner
    a = args(ROOT / "inventories" / "production", url=None, api_key=None)
    gate.host_of(a)  # computed only: nothing is contacted
    assert a.url == "http://10.1.230.172:30000" and a.api_key is None
    a = args(ROOT / "inventories" / "production", url="http://127.0.0.1:1", api_key="k")
    gate.host_of(a)
    assert (a.url, a.api_key) == ("http://127.0.0.1:1", "k")  # given: kept
    f = write(tmp_path / "v.yml", {"sglang_port": 8000})
    assert planner.host_for(None, "ct129", vars_files=[f]).url() == "http://ct129:8000"
    host = planner.host_for(None, "h", {"ansible_host": "fd00::1", "sglang_port": 1})
    assert host.url() == "http://[fd00::1]:1"


def test_without_an_inventory_a_templated_value_is_templated_by_ansible(tmp_path):
    from bench import gate, planner
    f = write(tmp_path / "v.yml", {"base": 2, "sglang_gate_warmup": "{{ base + 1 }}"})
    assert gate.plan_of(args(None, vars=[str(f)]))["gate"]["options"]["warmup"] == 3
    bad = write(tmp_path / "bad.yml", {"sglang_gate_warmup": "{{ nowhere }}"})
    with pytest.raises(planner.PlanError, match="sglang_gate_warmup: .*'nowhere' is undefined"):
        gate.plan_of(args(None, vars=[str(bad)]))


# --------------------------------------------------------------------------- refusals ------
def test_clear_errors_name_the_inventory_and_its_hosts(tmp_path):
    inv = inventory(tmp_path)
    p = bench("gate", "-i", inv / "hosts.yml", "--host", "ct999", "--quiet")
    assert p.returncode == 2
    hosts = inv / "hosts.yml"
    assert "bench gate: no host ct999 in the inventory %s (its hosts: ct129)" % hosts in p.stderr
    p = bench("calibrate", "-i", tmp_path / "nowhere", "--host", "ct129", "--quiet")
    assert p.returncode == 2 and "bench calibrate: no inventory %s" % (tmp_path / "nowhere") in p.stderr
    p = bench("gate", "-i", inv / "hosts.yml", "--quiet")
    assert p.returncode == 2 and "needs --host NAME" in p.stderr
    p = bench("gate", "--quiet")
    assert p.returncode == 2 and "no server: give --url URL, or -i INVENTORY --host NAME" in p.stderr
    p = bench("calibrate", "--url", "http://127.0.0.1:9", "--write", "--quiet")
    assert p.returncode == 2 and "--write without FILE writes the host's vars: give -i" in p.stderr
    p = bench("gate", "--url", "http://127.0.0.1:9", "--vault-password-file", tmp_path / "pw", "--quiet")
    assert p.returncode == 2 and "--vault-password-file reads an inventory's vaulted files" in p.stderr


def test_compare_plan_takes_its_profiles_from_the_hosts_variables(tmp_path):
    inv = inventory(tmp_path)
    write(inv / "host_vars" / "ct129" / "profiles.yml",
          {"sglang_profiles": {"mine": {"context_length": 4096}}})
    p = bench("compare", "--plan", "-i", inv / "hosts.yml", "--host", "ct129",
              "--target", "nextn_3step=http://127.0.0.1:9", "--out", tmp_path / "out")
    assert p.returncode == 2
    assert "--target nextn_3step: no such profile in sglang_profiles (known: mine)" in p.stderr, p.stderr
    p = bench("compare", "-i", inv / "hosts.yml", "--host", "ct129", "--target", "a=http://127.0.0.1:9")
    assert p.returncode == 2 and "-i INVENTORY (the host's variables) is for --plan" in p.stderr


@pytest.mark.parametrize("command", ["gate", "calibrate", "tune"])
def test_a_relative_vars_path_is_the_users_from_where_they_stand(tmp_path, command):
    """`-i INVENTORY --host NAME --vars FILE`: FILE relative to the current directory (it was read
    under playbooks/, the loader's base, and the run stopped on Ansible's own error)."""
    inv = inventory(tmp_path, port=9)
    here = tmp_path / "here"
    # tune templates the host's API key (the candidates' own): a test key, not the vault's
    key = {"sglang_api_key": "test-key-0123456789abcdef"} if command == "tune" else {}
    write(here / "mine.yml", dict(SMALL, **key))
    extra = ["--launch", "exit 1 {args}", "--budget-minutes", 1, "--out", tmp_path / "out"] \
        if command == "tune" else []
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    e.pop("SGLANG_API_KEY", None)
    argv = [sys.executable, "-m", "bench", command, "-i", str(inv / "hosts.yml"), "--host", "ct129",
            "--vars", "mine.yml", "--quiet", *map(str, extra)]
    p = subprocess.run(argv, cwd=str(here), env=e, capture_output=True, text=True, timeout=240)
    assert "mine.yml" not in p.stderr and "playbooks" not in p.stderr, p.stderr[-2000:]
    if command == "tune":  # the plan read from mine.yml: its two cases measured (nothing starts)
        assert json.loads((tmp_path / "out" / "tune.json").read_text())["cases"] == ["coding", "concurrent"]
    else:  # read, then the server (port 9) is what is missing
        assert p.returncode == 2 and "cannot connect to 127.0.0.1:9" in p.stderr, p.stderr[-2000:]
