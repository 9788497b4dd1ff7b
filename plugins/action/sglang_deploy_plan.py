# -*- coding: utf-8 -*-
"""The deploy plan of a host, once, on the controller, set as the host's fact ``sglang_deploy_plan``:
the planner's (bench/planner.py, the one every caller plans with) for the task's variables."""
from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from bench.planner import inputs, plan_host, shareable
from sglang_perf.plan import deploy as deploy_plan

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
  inputs:
    description:
      - Return the roles' checked inputs as C(inputs) (secrets replaced - an API key that is set
        stands as set, never its value) and set no fact; for a command that plans again from this
        play's inputs without reading the inventory (playbooks/tasks/tune_host.yml, bench tune
        --inputs).
    type: bool
    default: false
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
    - C(sglang_deploy_plan), the plan by part (plugins/module_utils/sglang_perf/plan/parts.py) -
      host, roles, problems, profile, settings, release, model, gpu, server, topology, lock, gate,
      watch.
  returned: unless O(inputs)
  type: dict
inputs:
  description: The roles' checked inputs, no secret among them.
  returned: with O(inputs)
  type: dict
"""


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        if boolean(args.get("inputs", False), strict=False):
            values, problems = inputs(self._loader, self._templar, task_vars or {},
                                      list(args.get("roles") or deploy_plan.ROLES))
            if problems:
                result.update(changed=False, failed=True, msg="; ".join(problems))
                return result
            result.update(changed=False, inputs=shareable(values))
            return result
        plan = plan_host(self._loader, self._templar, task_vars or {}, args.get("roles") or deploy_plan.ROLES,
                         boolean(args.get("review", False), strict=False))
        # the refusal alone (the play stops here)
        if plan["problems"] and boolean(args.get("fail", True), strict=False):
            result.update(changed=False, failed=True, msg="; ".join(plan["problems"]))
            return result
        plan["preflight"] = bool(args.get("preflight", False))
        result.update(changed=False, ansible_facts={"sglang_deploy_plan": plan})
        result["msg"] = "%s: %s" % (plan["host"], "; ".join(plan["problems"]) or "no problem")
        return result
