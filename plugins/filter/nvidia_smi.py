# -*- coding: utf-8 -*-
"""Filter: parse ``nvidia-smi --query-gpu=index,name,memory.total,driver_version
--format=csv,noheader,nounits`` into a list of dicts."""
from __future__ import annotations

DOCUMENTATION = r"""
name: nvidia_smi_gpus
short_description: Parse nvidia-smi's GPU query CSV
description:
  - Turns the lines of C(nvidia-smi --query-gpu=index,name,memory.total,driver_version
    --format=csv,noheader,nounits) into dicts with index (int), name, memory_mib (int), driver.
"""


def nvidia_smi_gpus(lines):
    gpus = []
    for line in lines or []:
        parts = [p.strip() for p in str(line).split(",")]
        if len(parts) != 4 or not parts[0].isdigit():
            continue
        try:
            memory = int(float(parts[2]))
        except ValueError:
            memory = 0
        gpus.append({"index": int(parts[0]), "name": parts[1], "memory_mib": memory,
                     "driver": parts[3]})
    return gpus


class FilterModule(object):
    def filters(self):
        return {"nvidia_smi_gpus": nvidia_smi_gpus}
