"""The deploy plan of an inventory host, as plugins/action/sglang_deploy_plan.py computes it in the
preflight, without a play: bench/hostvars.py (Ansible's own inventory and variable manager) gives
the host's variables (group_vars, the rollout play's vars file, extra variables on top, as in
`ansible-playbook -e`), and plan_host() plans them under the role defaults. Milliseconds a case,
so a decision the plan makes is tested here rather than through a playbook run."""
from __future__ import annotations

from ansible.template import Templar

from bench import hostvars
from conftest import ROOT
from plugins.action.sglang_deploy_plan import plan_host

LOCAL = ROOT / "inventories" / "local" / "hosts.yml"
PRODUCTION = ROOT / "inventories" / "production" / "hosts.yml"
ROLLOUT_VARS = ROOT / "playbooks" / "vars" / "rollout.yml"
# what tests/hostutil.py play() passes before a test's own -e (the plumbing tests' one-case plan)
PLUMBING = ROOT / "tests" / "vars" / "plumbing_gate.yml"
# what the preflight's fact gathering reports on the containers and the GPU host
FACTS = {"distribution": "Debian", "distribution_major_version": "12", "distribution_version": "12.12",
         "architecture": "x86_64", "os_family": "Debian"}


def host_vars(extra=None, host="ct-local", inventory=LOCAL, play_hosts=None, plumbing=True):
    """The host's variables as a task of the deploy's preflight play sees them (with plumbing:
    as hostutil.play() runs it, tests/vars/plumbing_gate.yml under ``extra``)."""
    loader, task_vars = hostvars.task_vars(inventory, host, roles=(), play_vars_files=[ROLLOUT_VARS],
                                           vars_files=[PLUMBING] if plumbing else [], extra=extra)
    hosts = play_hosts or list(task_vars["groups"].get("sglang_servers", []))
    task_vars.update(ansible_facts=dict(FACTS), ansible_play_hosts_all=hosts)
    return loader, task_vars


def plan_for(extra=None, host="ct-local", inventory=LOCAL, roles=("nvidia_gpu", "sglang", "sglang_gate"),
             review=False, play_hosts=None, plumbing=True):
    """The plan the preflight would set as the host's fact sglang_deploy_plan."""
    loader, task_vars = host_vars(extra, host, inventory, play_hosts, plumbing)
    return plan_host(loader, Templar(loader=loader, variables=task_vars), task_vars, roles, review)
