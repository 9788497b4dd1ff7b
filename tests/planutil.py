"""The deploy plan of an inventory host, as the preflight's sglang_deploy_plan action computes it,
without a play: the planner (bench/planner.py, Ansible's own inventory and variable manager) with
the rollout play's vars file, the plumbing tests' vars and extra variables on top (as
`ansible-playbook -e`). Milliseconds a case, so a decision the plan makes is tested here rather
than through a playbook run."""
from __future__ import annotations

from bench import planner
from conftest import ROOT

LOCAL = ROOT / "inventories" / "local" / "hosts.yml"
PRODUCTION = ROOT / "inventories" / "production" / "hosts.yml"
ROLLOUT_VARS = ROOT / "playbooks" / "vars" / "rollout.yml"
# what tests/hostutil.py play() passes before a test's own -e (the plumbing tests' one-case plan)
PLUMBING = ROOT / "tests" / "vars" / "plumbing_gate.yml"
# what the preflight's fact gathering reports on the containers and the GPU host
FACTS = {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.12",
         "architecture": "x86_64", "os_family": "Debian"}


def plan_for(extra=None, host="ct-local", inventory=LOCAL, roles=("nvidia_gpu", "sglang", "sglang_gate"),
             review=False, play_hosts=None, plumbing=True):
    """The plan the preflight would set as the host's fact sglang_deploy_plan (with plumbing: as
    hostutil.play() runs it, tests/vars/plumbing_gate.yml under ``extra``)."""
    return planner.plan_for(inventory, host, extra, roles, review, vars_files=[PLUMBING] if plumbing else [],
                            play_vars_files=[ROLLOUT_VARS], facts=FACTS, play_hosts=play_hosts)
