# -*- coding: utf-8 -*-
"""playbooks/compare.yml's plan of one host, on the controller (sglang_perf.plan.comparison.make
decides): the profiles, the resolved cases each is measured with, the module's options and the
report the tuner writes; every refusal of compare's inputs fails the task before anything changes."""
from __future__ import annotations

from ansible.plugins.action import ActionBase

from sglang_perf.plan import comparison

DOCUMENTATION = r"""
name: sglang_compare_plan
short_description: Plan playbooks/compare.yml on the controller, before anything changes
description:
  - Decides which profiles the comparison runs and the resolved cases each is measured with -
    the gate plan at the context depths (O(engines) given) or one case per concurrency level -
    and refuses bad inputs, each naming its variable. Returns the plan; changes nothing.
options:
  engines: {description: compare_engines ('sglang,vllm' or a list; empty - the concurrency sweep)., type: raw}
  engine_profiles:
    description: Each engine's profiles (compare_engine_profiles, else sglang_gate_compare_profiles).
    type: dict
  profiles: {description: compare_profiles (null - from the engines, or O(sweep_profiles))., type: list}
  sweep_profiles: {description: The concurrency sweep's profiles (sglang_gate_sweep_profiles)., type: list}
  known_profiles: {description: The names of sglang_profiles., type: list}
  deploy_best: {description: compare_deploy_best., type: bool}
  gate_plan: {description: sglang_gate_plan (with O(engines))., type: dict}
  gate: {description: The gate's api, confidence, warmup and timeouts (with O(engines))., type: dict}
  context_tokens: {description: compare_context_tokens., type: raw}
  context_requests: {description: compare_context_requests., type: raw}
  levels: {description: compare_levels (the sweep)., type: list}
  requests: {description: compare_requests (the sweep)., type: int}
  warmup: {description: compare_warmup (the sweep)., type: int}
  max_tokens: {description: compare_max_tokens (the sweep)., type: int}
  topology: {description: The deploy plan's topology (a multi-node deployment is refused)., type: dict}
  current: {description: "The host's own profile (the report's current, when compared).", type: str}
"""

EXAMPLES = r"""
- name: Plan the comparison
  sglang_compare_plan:
    engines: "{{ compare_engines }}"
    levels: "{{ compare_levels }}"
  register: __compare
"""

RETURN = r"""
profiles: {description: The profiles compared, in order., returned: success, type: list}
cases: {description: The resolved cases each profile is measured with., returned: success, type: list}
"""

INTS = ("requests", "warmup", "max_tokens")


def _int(value):
    """A templated number as Ansible hands it over ('16'); anything else as it is, to be refused."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def inputs(args):
    """The action's arguments with the numbers Jinja renders as text made numbers again."""
    a = dict(args)
    for key in INTS:
        if key in a:
            a[key] = _int(a[key])
    if isinstance(a.get("levels"), list):
        a["levels"] = [_int(c) for c in a["levels"]]
    if isinstance(a.get("gate"), dict):
        a["gate"] = {k: v for k, v in a["gate"].items() if v is not None}
    return a


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        out = comparison.make(dict(inputs(self._task.args), host=(task_vars or {}).get("inventory_hostname")))
        if out["problems"]:
            result.update(changed=False, failed=True, msg="; ".join(out["problems"]), **out)
            return result
        cases = ", ".join(c["case"] for c in out["cases"])
        result.update(changed=False, msg="profiles %s; cases %s" % (", ".join(out["profiles"]), cases), **out)
        return result
