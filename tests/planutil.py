"""The deploy plan of an inventory host, as plugins/action/sglang_deploy_plan.py computes it in the
preflight, without a play: Ansible's own inventory and variable manager give the host's
variables (role defaults, group_vars, the rollout play's vars file, extra variables on top, as in
`ansible-playbook -e`), and plan_host() plans them. Milliseconds a case, so a decision the plan
makes is tested here rather than through a playbook run."""
from __future__ import annotations

import json

from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

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
    loader = DataLoader()
    loader.set_basedir(str(ROOT / "playbooks"))
    inv = InventoryManager(loader=loader, sources=[str(inventory)])
    manager = VariableManager(loader=loader, inventory=inv)
    manager._hostvars = HostVars(inventory=inv, variable_manager=manager, loader=loader)  # as a run sets it
    # -e JSON, loaded as ansible-playbook loads it (trusted, so templates in it render)
    base = loader.load_from_file(str(PLUMBING), trusted_as_template=True) if plumbing else {}
    manager._extra_vars = dict(base, **loader.load(json.dumps(extra or {})))
    hosts = play_hosts or [h.name for h in inv.get_hosts("sglang_servers")]
    task_vars = manager.get_vars(host=inv.get_host(host), include_hostvars=True)
    task_vars = dict(task_vars)
    task_vars.update(loader.load_from_file(str(ROLLOUT_VARS), trusted_as_template=True))
    task_vars.update(manager.extra_vars)
    task_vars.update(ansible_facts=dict(FACTS), ansible_play_hosts_all=hosts)
    return loader, task_vars


def plan_for(extra=None, host="ct-local", inventory=LOCAL, roles=("nvidia_gpu", "sglang", "sglang_gate"),
             review=False, play_hosts=None, plumbing=True):
    """The plan the preflight would set as the host's fact sglang_deploy_plan."""
    loader, task_vars = host_vars(extra, host, inventory, play_hosts, plumbing)
    return plan_host(loader, Templar(loader=loader, variables=task_vars), task_vars, roles, review)
