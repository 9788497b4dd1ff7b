# -*- coding: utf-8 -*-
"""The deploy plan of a host, once, on the controller (sglang_perf.deploy_plan.make decides):
every role input type-checked against the roles' argument specs and checked by value, and the
plan the roles, the gate, the rescue and the rollout summary read, set as the host's fact
``sglang_deploy_plan``."""
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
    gate plan and thresholds, the multi-node topology), checksums the release's lock file and
    local wheels on the controller, and sets the host's fact C(sglang_deploy_plan).
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
  lock_optional:
    description: A missing lock file names the release C(<version>-unlocked) instead of refusing (playbooks/render.yml).
    type: bool
    default: false
  fail:
    description: Fail the task when the plan has problems.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Plan the deploy (every refusal, before any host changes)
  sglang_deploy_plan:
"""

RETURN = r"""
ansible_facts:
  description: C(sglang_deploy_plan), the plan (problems, engine, version, release, argv, paths, topology, gate cases).
  returned: always
  type: dict
"""

# Role data the plan reads besides the argument specs' options (roles/*/vars/main.yml; the rest
# of those files is there for the defaults that derive from it).
ROLE_DATA = ("_nvidia_gpu_repo_distros", "_sglang_cuda_runtime_by_release", "_sglang_min_driver_by_cuda")
# Inputs the role defaults derive others from: templated first, so the derived values below exist.
FIRST = ("sglang_profiles", "sglang_profile", "sglang_engine", "sglang_version", "sglang_vllm_version",
         "sglang_host", "sglang_port")


def _role_dir(name):
    for d in C.DEFAULT_ROLES_PATH:
        path = os.path.join(d, name)
        if os.path.isdir(path):
            return path
    raise AnsibleError("sglang_deploy_plan: role %s is not in the roles path (%s)"
                       % (name, ", ".join(C.DEFAULT_ROLES_PATH)))


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def _load(self, path):
        if not os.path.exists(path):
            return {}
        return self._loader.load_from_file(path, trusted_as_template=True) or {}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        roles = list(args.get("roles") or deploy_plan.ROLES)
        dirs = {r: _role_dir(r) for r in roles}
        layers = {}
        for r in roles:
            layers.update(self._load(os.path.join(dirs[r], "defaults", "main.yml")))
        for r in roles:  # derived names and role data (inputs come from the play)
            layers.update(self._load(os.path.join(dirs[r], "vars", "main.yml")))
        layers.update(task_vars)
        specs = {r: (self._load(os.path.join(dirs[r], "meta", "argument_specs.yml")).get("argument_specs") or {})
                 .get("main", {}).get("options", {}) for r in roles}
        problems, values = [], {}

        def render(names, role):
            templar = self._templar.copy_with_new_env(available_variables=dict(layers, role_path=dirs[role]))
            for name in names:
                if name in values or name not in layers:
                    continue
                try:
                    values[name] = templar.template(layers[name])
                except AnsibleError as e:
                    problems.append("%s: %s" % (name, e.message))

        if "sglang" in roles:
            render(FIRST, "sglang")
            chosen = (values.get("sglang_profiles") or {}).get(values.get("sglang_profile"))
            engine = deploy_plan.profile.profile_engine(chosen if isinstance(chosen, dict) else {},
                                                        values.get("sglang_engine"))
            bind = values.get("sglang_host")
            layers.update({
                "_sglang_run_engine": engine,
                "_sglang_engine_version": values.get("sglang_vllm_version" if engine == "vllm" else "sglang_version"),
                "_sglang_local_url": "http://%s:%s" % ("127.0.0.1" if bind in ("0.0.0.0", "::", "") else bind,
                                                       values.get("sglang_port"))})
        for r in roles:
            if r == "sglang_gate" and "sglang" in roles:
                # the gate's defaults derive from the plan's state_dir (the gate reads the plan,
                # not the sglang role's variables)
                layers["sglang_deploy_plan"] = {"state_dir": values.get("sglang_state_dir")}
            render(list(specs[r]) + [k for k in ROLE_DATA if k.startswith("_%s_" % r)], r)
        for r in roles:
            given = {k: values[k] for k in specs[r] if k in values}
            checked = ArgumentSpecValidator(specs[r]).validate(given, validate_role_argument_spec=True)
            problems.extend("%s: %s" % (r, m) for m in checked.error_messages)
            values.update({k: checked.validated_parameters[k] for k in given
                           if k in checked.validated_parameters})

        wheels, lock_text, lock_exists = [], None, False
        if "sglang" in roles and not problems:
            for path in values.get("sglang_pip_local_files") or []:
                wheels.append((path, _sha256(path) if os.path.isfile(path) else None))
            lock = values.get("sglang_pip_constraints")
            lock_exists = isinstance(lock, str) and os.path.isfile(lock)
            if lock_exists:
                with open(lock, encoding="utf-8") as f:
                    lock_text = f.read().rstrip()  # as the file lookup read it before
        host = task_vars.get("inventory_hostname")
        if problems:  # types are wrong: the value checks would only repeat them
            plan = {"host": host, "problems": problems, "roles": roles}
        else:
            plan = deploy_plan.make(values, host, task_vars.get("groups", {}), task_vars.get("hostvars", {}),
                                    task_vars.get("ansible_play_hosts_all"), task_vars.get("ansible_facts", {}),
                                    lock_text=lock_text, lock_exists=lock_exists, wheels=wheels,
                                    lock_optional=bool(args.get("lock_optional", False)), roles=roles)
        result.update(changed=False, ansible_facts={"sglang_deploy_plan": plan})
        if plan["problems"] and args.get("fail", True):
            result.update(failed=True, msg="; ".join(plan["problems"]))
        else:
            result["msg"] = "%s: %s" % (host, "no problem" if not plan["problems"] else "; ".join(plan["problems"]))
        return result
