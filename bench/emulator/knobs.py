"""Emulator-only knobs, read from SGLEMU_* environment variables.

The command line must stay byte-for-byte what `sglang.launch_server` takes, so everything that
only the emulator understands comes from the environment. README.md documents each knob.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List

PREFIX = "SGLEMU_"

DEFAULT_ACCEPT_PROBS = "0.75,0.96,0.96,0.9,0.85,0.8,0.75,0.7"

# Fault switches: name (lowercase, no prefix) -> type. 0 / unset disables a switch.
FAULT_NAMES = {
    "http500_every": int,
    "truncate_after_tokens": int,
    "stall_after_tokens": int,
    "stall_seconds": float,
    "crash_after_requests": int,
    "apply_to_warmup": int,
}


class KnobError(ValueError):
    """A SGLEMU_* variable that does not parse."""


def _get(env, name, conv, default):
    raw = env.get(PREFIX + name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return conv(raw.strip())
    except ValueError as exc:
        raise KnobError("%s%s=%r: %s" % (PREFIX, name, raw, exc)) from None


def parse_probs(text: str) -> List[float]:
    probs = [float(p) for p in text.split(",") if p.strip()]
    if not probs or any(not 0.0 <= p <= 1.0 for p in probs):
        raise ValueError("need a comma-separated list of probabilities in [0, 1]")
    return probs


@dataclass
class Faults:
    http500_every: int = 0
    truncate_after_tokens: int = 0
    stall_after_tokens: int = 0
    stall_seconds: float = 0.0
    crash_after_requests: int = 0
    apply_to_warmup: int = 1

    def update(self, values: Dict[str, object]) -> None:
        unknown = sorted(set(values) - set(FAULT_NAMES))
        if unknown:
            raise KnobError("unknown fault(s): %s (known: %s)"
                            % (", ".join(unknown), ", ".join(sorted(FAULT_NAMES))))
        for name, value in values.items():
            conv = FAULT_NAMES[name]
            try:
                setattr(self, name, conv(0 if value is None else value))
            except (TypeError, ValueError):
                raise KnobError("fault %s=%r is not a number" % (name, value)) from None
            if getattr(self, name) < 0:
                raise KnobError("fault %s must be >= 0" % name)

    def as_dict(self) -> Dict[str, object]:
        return asdict(self)


@dataclass
class Knobs:
    load_seconds: float = 0.0
    warmup_seconds: float = 0.0
    warmup_requests: int = 2
    warmup_factor: float = 0.4
    seed: int = 0
    speed_scale: float = 1.0
    batch_slowdown: float = 0.005
    prefill_tok_s: float = 3000.0
    base_step_ms: float = 37.45
    spec_overhead_ms: float = 4.0
    spec_step_ms: float = 5.2
    spec_draft_ms: float = 1.0
    accept_probs: List[float] = field(default_factory=lambda: parse_probs(DEFAULT_ACCEPT_PROBS))
    longctx_penalty: float = 0.35
    longctx_tokens: int = 32768
    chars_per_token: float = 4.0
    thinking_fraction: float = 0.3
    health_poll_seconds: float = 0.02
    architecture: str = "Qwen3_5ForConditionalGeneration"
    faults: Faults = field(default_factory=Faults)

    @classmethod
    def from_env(cls, env: Dict[str, str] | None = None) -> Knobs:
        env = os.environ if env is None else env
        k = cls()
        k.load_seconds = _get(env, "LOAD_SECONDS", float, k.load_seconds)
        k.warmup_seconds = _get(env, "WARMUP_SECONDS", float, k.warmup_seconds)
        k.warmup_requests = _get(env, "WARMUP_REQUESTS", int, k.warmup_requests)
        k.warmup_factor = _get(env, "WARMUP_FACTOR", float, k.warmup_factor)
        # Unset: a new seed per start, like a real server's run-to-run variation (the seed is in
        # /_emulator/stats `configured`); set SGLEMU_SEED for a reproducible run.
        k.seed = _get(env, "SEED", int, int.from_bytes(os.urandom(4), "big"))
        k.speed_scale = _get(env, "SPEED_SCALE", float, k.speed_scale)
        k.batch_slowdown = _get(env, "BATCH_SLOWDOWN", float, k.batch_slowdown)
        k.prefill_tok_s = _get(env, "PREFILL_TOK_S", float, k.prefill_tok_s)
        k.base_step_ms = _get(env, "BASE_STEP_MS", float, k.base_step_ms)
        k.spec_overhead_ms = _get(env, "SPEC_OVERHEAD_MS", float, k.spec_overhead_ms)
        k.spec_step_ms = _get(env, "SPEC_STEP_MS", float, k.spec_step_ms)
        k.spec_draft_ms = _get(env, "SPEC_DRAFT_MS", float, k.spec_draft_ms)
        k.accept_probs = _get(env, "ACCEPT_PROBS", parse_probs, k.accept_probs)
        k.longctx_penalty = _get(env, "LONGCTX_PENALTY", float, k.longctx_penalty)
        k.longctx_tokens = _get(env, "LONGCTX_TOKENS", int, k.longctx_tokens)
        k.chars_per_token = _get(env, "CHARS_PER_TOKEN", float, k.chars_per_token)
        k.thinking_fraction = _get(env, "THINKING_FRACTION", float, k.thinking_fraction)
        k.health_poll_seconds = _get(env, "HEALTH_POLL_SECONDS", float, k.health_poll_seconds)
        k.architecture = _get(env, "ARCHITECTURE", str, k.architecture)
        f = k.faults
        f.http500_every = _get(env, "FAULT_HTTP500_EVERY", int, f.http500_every)
        f.truncate_after_tokens = _get(env, "FAULT_TRUNCATE_AFTER_TOKENS", int,
                                       f.truncate_after_tokens)
        f.stall_after_tokens = _get(env, "FAULT_STALL_AFTER_TOKENS", int, f.stall_after_tokens)
        f.stall_seconds = _get(env, "FAULT_STALL_SECONDS", float, f.stall_seconds)
        f.crash_after_requests = _get(env, "FAULT_CRASH_AFTER_REQUESTS", int,
                                      f.crash_after_requests)
        f.apply_to_warmup = _get(env, "FAULT_APPLY_TO_WARMUP", int, f.apply_to_warmup)
        for name in ("speed_scale", "warmup_factor", "prefill_tok_s", "base_step_ms",
                     "chars_per_token"):
            if getattr(k, name) <= 0:
                raise KnobError("%s%s must be > 0" % (PREFIX, name.upper()))
        if k.batch_slowdown < 0 or k.warmup_requests < 0 or k.longctx_tokens <= 0:
            raise KnobError("%sBATCH_SLOWDOWN / WARMUP_REQUESTS must be >= 0, "
                            "LONGCTX_TOKENS > 0" % PREFIX)
        if not 0.0 <= k.longctx_penalty <= 1.0 or not 0.0 <= k.thinking_fraction < 1.0:
            raise KnobError("%sLONGCTX_PENALTY in [0, 1], THINKING_FRACTION in [0, 1)" % PREFIX)
        return k

    def as_dict(self) -> Dict[str, object]:
        d = asdict(self)
        d["faults"] = self.faults.as_dict()
        return d
