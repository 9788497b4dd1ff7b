"""SGLang 0.5.23's adaptive speculation (srt/speculative/adaptive_spec_params.py), re-written.

The config (its defaults, or the JSON file of --speculative-adaptive-config), the union of its
candidate steps (what start-up holds --speculative-num-steps to and sizes the buffers by:
speculative_hook.py _init_adaptive_speculative_params, spec_info.py
resolve_max_speculative_num_draft_tokens) and the slots that move the steps at run time.

A slot per batch size with its candidate steps; each slot keeps an EMA of the drafts accepted per
request and moves its steps after a warmup, every few batches: down while the EMA is at or below
the next lower candidate - 0.5 (+ down hysteresis; 0.5 to reach 0), else up while it is above
the current one - 0.5 (+ up hysteresis); ceiling_coeff > 0 caps a target no higher than the
current steps at ceil(EMA x it). A batch routes to the largest slot key <= its size (no CUDA-graph
padding: SGLang pads only to an explicit --cuda-graph-bs-decode, which the emulator does not take).
"""
from __future__ import annotations

import bisect
import json
import math
from typing import Any, Dict, List, Tuple

# adaptive_spec_params.py DEFAULT_ADAPTIVE_CONFIG
DEFAULT_CONFIG: Dict[str, Dict[str, Any]] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25,
          "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
          "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0,
           "ceiling_coeff": 0},
}


def load_config(path: str | None) -> Tuple[Dict[str, Any], Dict[int, Dict[str, Any]]]:
    """_load_adaptive_config: the whole config and its batch-size entries; raises what SGLang
    raises (the file's OSError or JSON error, its ValueErrors word for word)."""
    if path is not None:
        with open(path) as f:
            cfg = json.load(f)
    else:
        cfg = DEFAULT_CONFIG
    entries: Dict[int, Dict[str, Any]] = {}
    for key, entry in cfg.items():
        if not key.isdigit():
            continue
        steps = entry.get("candidate_steps")
        if (not isinstance(steps, list) or not steps
                or not all(isinstance(s, int) and s >= 0 for s in steps)):
            raise ValueError(f"BS {key}: candidate_steps must be a list of non-negative ints, "
                             f"got {steps!r}")
        entries[int(key)] = entry
    if not entries:
        raise ValueError("speculative_adaptive_config must contain at least one integer-string "
                         'BS key, e.g. {"1": {"candidate_steps": [1,3,7]}}. '
                         f"Got keys: {list(cfg.keys())}")
    return cfg, entries


def candidate_steps(path: str | None) -> List[int]:
    """resolve_candidate_steps_from_config: the union of every slot's candidate steps (the
    default config's: [0, 1, 3, 5, 7])."""
    _, entries = load_config(path)
    return sorted({s for entry in entries.values() for s in entry["candidate_steps"]})


def max_draft_tokens(args: Dict[str, Any]) -> int | None:
    """spec_info.py resolve_max_speculative_num_draft_tokens, of the resolved ``args``: the
    largest draft-token width the server may run, which SGLang sizes its buffers by (the mamba
    verify state, the output slots reserved per request): the draft tokens, or with adaptive
    speculation (topk 1) the largest candidate step + 1 of its config."""
    if args.get("speculative_algorithm") is None or args.get("speculative_num_draft_tokens") is None:
        return None
    if not args.get("speculative_adaptive"):
        return int(args["speculative_num_draft_tokens"])
    return max(candidate_steps(args.get("speculative_adaptive_config"))) + 1


class AdaptiveSlot:
    """AdaptiveStepSlot."""

    def __init__(self, initial: int, cfg: Dict[str, Any]):
        self.candidates = sorted(set(int(x) for x in cfg["candidate_steps"]))
        self.alpha = float(cfg.get("ema_alpha", 0.2))
        self.interval = int(cfg.get("update_interval", 5))
        self.warmup = int(cfg.get("warmup_batches", 10))
        self.down = float(cfg.get("down_hysteresis", -0.25))
        self.up = float(cfg.get("up_hysteresis", 0.0))
        self.ceiling_coeff = float(cfg.get("ceiling_coeff", 0))
        self.steps = initial if initial in self.candidates else self.candidates[len(self.candidates) // 2]
        self.ema = float(self.steps - 1)
        self.batches = 0

    def update(self, accepted_per_request: List[int]) -> None:
        if self.steps > 0:
            avg = sum(accepted_per_request) / float(len(accepted_per_request))
            self.ema = (1 - self.alpha) * self.ema + self.alpha * avg
        self.batches += 1
        if self.batches <= self.warmup or (self.batches - self.warmup) % self.interval:
            return
        idx = self.candidates.index(self.steps)
        if self.steps == 0:
            idx = min(idx + 1, len(self.candidates) - 1)
            if self.candidates[idx] > 0 and self.ema < 0:
                self.ema = float(self.candidates[idx] - 1)
            self.steps = self.candidates[idx]
            return
        start = idx
        while idx > 0:
            lower = self.candidates[idx - 1]
            if self.ema <= (0.5 if lower == 0 else lower - 0.5) + self.down:
                idx -= 1
            else:
                break
        if idx == start:
            while idx < len(self.candidates) - 1 and self.ema > self.candidates[idx] - 0.5 + self.up:
                idx += 1
        # the EMA ceiling caps a target at or below the current steps, never a step up
        if self.ceiling_coeff > 0 and self.candidates[idx] <= self.steps:
            ceiling = max(1, math.ceil(self.ema * self.ceiling_coeff))
            while idx > 0 and self.candidates[idx] > ceiling:
                idx -= 1
        self.steps = self.candidates[idx]


class AdaptiveSteps:
    """The slots of an adaptive server (AdaptiveSpeculativeParams) and the draft worker's active
    steps (AdaptiveController: eagle_worker_v2.py activates the batch's slot before each decode
    forward and the slot's new steps after its verify; it starts on the resolved steps, which a
    slot whose candidates lack them replaces by its middle candidate at its first batch).
    ``config``: SGLang's JSON file (None: its defaults)."""

    def __init__(self, initial: int, config: str | None = None):
        cfg, entries = load_config(config)
        common = {key: value for key, value in cfg.items() if not str(key).isdigit()}
        self.keys = sorted(entries)
        self.slots = {bs: AdaptiveSlot(initial, dict(common, **entries[bs])) for bs in self.keys}
        self.max_steps = max(max(s.candidates) for s in self.slots.values())
        self.active = initial

    def candidates(self) -> Dict[int, List[int]]:
        return {bs: list(s.candidates) for bs, s in self.slots.items()}

    def _slot(self, batch: int) -> AdaptiveSlot:
        idx = bisect.bisect_right(self.keys, batch) - 1
        return self.slots[self.keys[max(0, idx)]]

    def steps_for(self, batch: int) -> int:
        return self._slot(batch).steps

    def on_verify(self, accepted_per_request: List[int], batch: int) -> None:
        slot = self._slot(batch)
        slot.update(accepted_per_request)
        self.active = slot.steps
