# -*- coding: utf-8 -*-
"""Filters over sglang_perf.plan.fleet (plugins/module_utils/sglang_perf/plan/fleet.py): the multi-node
topology of a host and the rollout's batches."""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_fleet
short_description: Multi-node topology and rollout batches of SGLang fleets
description:
  - C(sglang_rollout_serial) returns the play's serial list from a canary size and a batch size.
  - C(sglang_rollout_batches) splits hosts into the batches Ansible's serial makes.
  - C(sglang_split_deployments) names the multi-node deployments whose hosts fall into more than
    one batch.
"""

from sglang_perf.plan import fleet


class FilterModule(object):
    def filters(self):
        return {
            "sglang_rollout_serial": fleet.sglang_rollout_serial,
            "sglang_rollout_batches": fleet.sglang_rollout_batches,
            "sglang_split_deployments": fleet.sglang_split_deployments,
        }
