# -*- coding: utf-8 -*-
"""The deploy plan of a host, once, on the controller (sglang_perf.deploy_plan.make decides):
every role input type-checked against the roles' argument specs and checked by value, and the
plan the roles, the gate, the rescue and the rollout summary read, set as the host's fact
``sglang_deploy_plan``. ``plan_host`` is the whole of it for one host's variables (the tests call
it with Ansible's own variable manager, without a play)."""
from __future__ import annotations

import hashlib
import os

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from sglang_perf import deploy_plan

DOCUMENTATION = r"""
name: sglang_deploy_plan
short_description: Plan a host's SGLang deploy once, on the controller, before anything changes
description:
  - Reads every input of the roles named in O(roles) (role defaults under inventory, play and extra
    variables, as Ansible's precedence has it), checks their types against each role's
    C(meta/argument_specs.yml) and their values (ranges, paths, names, secrets, the launch
    profile, the memory budget, the bind address, the CUDA runtime against the driver branch, the
    gate plan and thresholds, the multi-node topology, the rollout settings), checksums the
    release's lock file and local wheels on the controller, and sets the host's fact
    C(sglang_deploy_plan).
  - The fact's C(problems) lists every refusal, each naming its variable; the task fails with them
    (unless O(fail) is false) and changes nothing anywhere.
  - Read-only; runs the same in check mode. Secrets never enter the plan (only whether an API key
    is set).
options:
  roles:
    description: The roles whose inputs are planned, in order.
    type: list
    elements: str
    default: [nvidia_gpu, sglang, sglang_gate]
  review:
    description:
      - The plan of a unit rendered for review (playbooks/render.yml) - a missing lock file names
        the release C(<version>-unlocked), and a release whose CUDA runtime the role does not know
        yet is rendered all the same; a deploy refuses both.
    type: bool
    default: false
  fail:
    description: Fail the task when the plan has problems.
    type: bool
    default: true
  preflight:
    description:
      - This is the deploy's preflight (playbooks/preflight.yml) - the plan stands for the whole run
        (C(preflight) in the fact); the roles plan again only without it (a role run alone, or
        included with other variables, plans with what it is given).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Plan the deploy (every refusal, before any host changes)
  sglang_deploy_plan:

- name: Plan the SGLang service and the gate only
  sglang_deploy_plan:
    roles: [sglang, sglang_gate]
"""

RETURN = r"""
ansible_facts:
  description:
    - C(sglang_deploy_plan), the plan (problems, engine, version, release, argv, paths, topology,
      gate cases).
  returned: always
  type: dict
"""

# Inputs of the playbooks (playbooks/vars/rollout.yml) the plan checks when the play has them.
PLAY_INPUTS = ("sglang_rollout_canary", "sglang_rollout_batch")
# Role data the plan reads besides the argument specs' options (roles/*/vars/main.yml; the rest
# of those files is there for the defaults that derive from it).
ROLE_DATA = ("_nvidia_gpu_repo_distros", "_sglang_min_driver_by_cuda")
# What the engine and its version follow: templated first, for inventory inputs that name them
# (the local inventory's and Molecule's emulator wheel: _sglang_run_engine, _sglang_engine_version).


def role_dir(name):
    for d in C.DEFAULT_ROLES_PATH:
        path = os.path.join(d, name)
        if os.path.isdir(path):
            return path
    raise AnsibleError("sglang_deploy_plan: role %s is not in the roles path (%s)"
                       % (name, ", ".join(C.DEFAULT_ROLES_PATH)))


def _sha256(path):
    """A file's sha256 on the controller, None when it is not there."""
    if not os.path.isfile(path):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _read_lock(path):
    """A lock file's text as Ansible's file lookup reads it; None when there is no such file."""
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().rstrip()


def _load(loader, path):
    if not os.path.exists(path):
        return {}
    return loader.load_from_file(path, trusted_as_template=True) or {}


def inputs(loader, templar, task_vars, roles):
    """(values, problems): every role input of ``roles`` as the play sees it - role defaults under
    the play's variables - templated and checked against the roles' argument specs (converted to
    their types), plus the role data and the play inputs the plan reads."""
    dirs = {r: role_dir(r) for r in roles}
    layers = {}
    for r in roles:
        layers.update(_load(loader, os.path.join(dirs[r], "defaults", "main.yml")))
    for r in roles:  # derived names and role data (inputs come from the play)
        layers.update(_load(loader, os.path.join(dirs[r], "vars", "main.yml")))
    layers.update(task_vars)
    specs = {}
    for r in roles:
        spec = _load(loader, os.path.join(dirs[r], "meta", "argument_specs.yml")).get("argument_specs") or {}
        # the plan is what is being made here: the roles that read it declare it, nobody sets it
        options = spec.get("main", {}).get("options", {})
        specs[r] = {k: o for k, o in options.items() if k != "sglang_deploy_plan"}
    problems, values = [], {}

    def render(names, role):
        engine = templar.copy_with_new_env(available_variables=dict(layers, role_path=dirs[role]))
        for name in names:
            if name in values or name not in layers:
                continue
            try:
                values[name] = engine.template(layers[name])
            except AnsibleError as e:
                problems.append("%s: %s" % (name, e.message))

    for r in roles:
        render(list(specs[r]) + [k for k in ROLE_DATA if k.startswith("_%s_" % r)], r)
    render(PLAY_INPUTS, roles[-1])
    for r in roles:
        given = {k: values[k] for k in specs[r] if k in values}
        checked = ArgumentSpecValidator(specs[r]).validate(given, validate_role_argument_spec=True)
        problems.extend("%s: %s" % (r, m) for m in checked.error_messages)
        converted = checked.validated_parameters
        values.update({k: converted[k] for k in given if k in converted})
    return values, problems


def plan_host(loader, templar, task_vars, roles=deploy_plan.ROLES, review=False):
    """The plan of the host whose variables are ``task_vars``."""
    roles = list(roles)
    values, problems = inputs(loader, templar, task_vars, roles)
    if problems:  # types are wrong: the value checks would only repeat them
        return {"host": task_vars.get("inventory_hostname"), "problems": problems, "roles": roles}
    return plan_values(values, task_vars, roles, review)


def plan_values(values, task_vars, roles=deploy_plan.ROLES, review=False):
    """The plan of role inputs ``values`` (inputs()'s, checked) on the host of ``task_vars``: what
    plan_host does after the inputs, for a caller that plans many variants of one host's inputs
    (bench/tune.py: one setting each)."""
    return deploy_plan.make(values, task_vars.get("inventory_hostname"), task_vars.get("groups", {}),
                            task_vars.get("hostvars", {}), task_vars.get("ansible_play_hosts_all"),
                            task_vars.get("ansible_facts", {}), read_lock=_read_lock, wheel_digest=_sha256,
                            review=review, roles=list(roles),
                            locks_dir=os.path.join(role_dir("sglang"), "files", "locks"))


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        plan = plan_host(self._loader, self._templar, task_vars or {}, args.get("roles") or deploy_plan.ROLES,
                         bool(args.get("review", False)))
        if plan["problems"] and args.get("fail", True):  # the refusal alone (the play stops here)
            result.update(changed=False, failed=True, msg="; ".join(plan["problems"]))
            return result
        plan["preflight"] = bool(args.get("preflight", False))
        result.update(changed=False, ansible_facts={"sglang_deploy_plan": plan})
        result["msg"] = "%s: %s" % (plan["host"], "; ".join(plan["problems"]) or "no problem")
        return result
