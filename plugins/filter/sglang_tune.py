# -*- coding: utf-8 -*-
"""Filters over plugins/module_utils/sglang_perf/judge/tune_launch.py for playbooks/tune.yml."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_tune
short_description: What a tuning run costs the host's service
description:
  - C(sglang_tune_outage) is the sentence playbooks/tune.yml says before it stops the service
    (tune_launch.outage) - the budget, one candidate's stop and the server's own start again, from
    the starts this host recorded in its last tuning (its tune.json's launches), else its ready
    timeout.
"""

from sglang_perf.judge import tune_launch

from ansible.errors import AnsibleFilterError


def sglang_tune_outage(budget_minutes, launches=None, ready_timeout=None):
    try:
        budget = float(budget_minutes)
    except (TypeError, ValueError):
        raise AnsibleFilterError("sglang_tune_outage: the budget is minutes, got %r" % (budget_minutes,))
    if budget <= 0:
        raise AnsibleFilterError("sglang_tune_outage: the budget must be above 0 minutes, got %r"
                                 % (budget_minutes,))
    return tune_launch.outage(budget, launches if isinstance(launches, list) else [], ready_timeout)[1]


class FilterModule(object):
    def filters(self):
        return {"sglang_tune_outage": sglang_tune_outage}
