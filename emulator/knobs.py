"""Emulator-only knobs, read from SGLEMU_* environment variables.

The command line must stay byte-for-byte what `sglang.launch_server` takes, so everything that
only the emulator understands comes from the environment. README.md documents each knob.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List

from .answers import AnswersFileError, load_answers

PREFIX = "SGLEMU_"

# p_i of NEXTN (conditional: draft i accepted given all before were). 0.75 / 0.96 / 0.96 fit the
# team's original logs (1 step AL 1.75, 3 steps 3.0-3.5; README "Calibration"). Steps 4 and 5 have no public
# SGLang figure: 0.40 / 0.35 are chosen so that a 4th step (+5.2 ms, 9 % of the 3-step cycle)
# adds about what it costs and a 5th less (C=1: 55.4 / 55.2 / 52.4 tok/s at 3 / 4 / 5 steps,
# empty prompt; 59.5 / 59.4 / 56.4 at a coding prompt), i.e. "one more step" stops paying at 3-4
# steps, as the single MTP layer run repeatedly loses accuracy (vLLM's chain, club-3090#74,
# falls to ~0.66 conditional from position 2 on).
DEFAULT_ACCEPT_PROBS = "0.75,0.96,0.96,0.40,0.35,0.3,0.25,0.2"

# DFLASH per block size: block -> p_i of its draft positions 1..B-1 (conditional, as above; a
# shorter list's last value stands for the positions past it). Block 16, the block
# z-lab/Qwen3.6-27B-DFlash was trained for (its config.json dflash_config.block_size): 0.83 at
# every position, 1 + sum(0.83^i, i=1..15) = 5.58 tokens per verify at an empty prompt (5.40 at a
# coding prompt's ~128 tokens, after the decline with context), z-lab/dflash#170's "~5.5" for
# z-lab/Qwen3.6-27B-DFlash on vLLM (the team's own target was 5-6); flat, as one figure pins no
# shape. Smaller blocks: chosen, not measured (no public per-position figure for this drafter at
# another block), a model assumption: its draft layers are non-causal (srt/models/dflash.py
# ENCODER_ONLY attention over the block: the anchor and B - 1 mask tokens), so a block of 8 is
# not the first 8 positions of a block of 16 but a block the drafter never saw in training, in
# which position i lacks the 16 - B masked positions that followed it there. Assumed less
# accurate, the more so the larger the share of its trained followers it lacks:
# p_B(i) = 0.83 x (1 - 0.06 x (16 - B) / (15 - i)), 1.6-6 % below block 16's (block 8: 0.802 at
# position 1 to 0.780 at 7). A block between two listed ones: linear in the block size, position
# by position; below the smallest: its first positions; above the largest: its positions, the
# last repeating (README "Drafters").
DEFAULT_DFLASH_ACCEPT_BY_BLOCK = ("2:0.78; 4:0.787,0.784,0.78; "
                                  "8:0.802,0.799,0.797,0.794,0.79,0.786,0.78; 16:0.83")

# Fault switches: name (lowercase, no prefix) -> type. 0 / unset disables a switch.
FAULT_NAMES = {
    "http500_every": int,
    "truncate_after_tokens": int,
    "stall_after_tokens": int,
    "stall_seconds": float,
    "crash_after_requests": int,
    "apply_to_warmup": int,
    # quality faults (README "Environment knobs", "Answering"): speed and acceptance unchanged
    "wrong_answers": float,
    "corrupt_above_kv": float,
    "unparsed_tools": int,
    "unparsed_reasoning": int,
    "drift_from_token": int,
}
# faults that are a share or a fraction: at most 1
FRACTION_FAULTS = ("wrong_answers", "corrupt_above_kv")


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


def parse_block_table(text: str) -> Dict[int, List[float]]:
    """``B:p1,p2,...; B:...`` -> {B: [p1, p2, ...]} (SGLEMU_DFLASH_ACCEPT_BY_BLOCK)."""
    table: Dict[int, List[float]] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        block, sep, probs = part.partition(":")
        if not sep or not block.strip().isdigit() or int(block) < 2:
            raise ValueError("need 'B:p1,p2,...' entries separated by ';', B a block size >= 2, "
                             "got %r" % part.strip())
        b = int(block)
        if b in table:
            raise ValueError("block %d is given twice" % b)
        table[b] = parse_probs(probs)
        if len(table[b]) > b - 1:
            raise ValueError("block %d has %d draft positions, got %d values"
                             % (b, b - 1, len(table[b])))
    if not table:
        raise ValueError("need at least one 'B:p1,p2,...' entry")
    return table


def dflash_block_probs(table: Dict[int, List[float]], block: int) -> List[float]:
    """p_i of the B - 1 draft positions of a DFLASH block of ``block`` tokens from the table
    (DEFAULT_DFLASH_ACCEPT_BY_BLOCK's rules: a listed block as listed, its last value standing
    for the positions past its list; between two listed blocks linear in the block size,
    position by position; below the smallest its first positions; above the largest its
    positions, the last repeating)."""
    def at(b: int, i: int) -> float:
        values = table[b]
        return values[min(i, len(values) - 1)]

    n = max(1, block - 1)
    sizes = sorted(table)
    below = [b for b in sizes if b <= block]
    above = [b for b in sizes if b >= block]
    if not below or not above:
        nearest = sizes[0] if not below else sizes[-1]
        return [at(nearest, i) for i in range(n)]
    lo, hi = below[-1], above[0]
    if lo == hi:
        return [at(lo, i) for i in range(n)]
    w = (block - lo) / float(hi - lo)
    return [at(lo, i) * (1 - w) + at(hi, i) * w for i in range(n)]


@dataclass
class Faults:
    http500_every: int = 0
    truncate_after_tokens: int = 0
    stall_after_tokens: int = 0
    stall_seconds: float = 0.0
    crash_after_requests: int = 0
    apply_to_warmup: int = 1
    # That share of answerable prompts (chosen by a hash of the prompt: always the same ones)
    # gets a wrong answer: another number, another value of the passage, a wrong argument.
    wrong_answers: float = 0.0
    # While the KV pool's usage (Scheduler.token_usage, 2 decimals) is at or above this fraction
    # at a request's admission or any step until its reply begins, the reply is garbled
    # (code-ish noise in place of the answer or the call).
    corrupt_above_kv: float = 0.0
    # 1: the tool-call parser no longer reads the model's format (the markup stays in content).
    unparsed_tools: int = 0
    # 1: the reasoning parser leaves the thinking (and </think>) in content.
    unparsed_reasoning: int = 0
    # N > 0: greedy output differs from token position N (0-based) on, for every prompt (the
    # words around an answer reworded; its value and a call's markup kept).
    drift_from_token: int = 0

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
            if name in FRACTION_FAULTS and getattr(self, name) > 1:
                raise KnobError("fault %s must be in [0, 1]" % name)

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
    # Extra step cost per request beyond the first (step x (1 + s (B - 1))). 0: at the batch
    # sizes the original logs show a verify forward is memory-bound (COMPUTE_BOUND_TOKENS) and their
    # C=4 run decoded no slower per request than C=1 (234 tok/s = 4 x 58.5).
    batch_slowdown: float = 0.0
    # Tokens per forward at which a step turns compute-bound (step x tokens / this beyond it):
    # weights per GPU 27.78 B params x 2 bytes / 2 GPUs read at 768 GB/s = 36.2 ms, against
    # 2 x 13.89 GFLOP per token at the A6000's 154.8 TFLOPS dense BF16 tensor peak (datasheet)
    # = 201 tokens. 0 turns it off.
    compute_bound_tokens: int = 201
    # GPU clock / thermal jitter: every decode step's time x exp(x), x an AR(1) process of
    # stationary sd CLOCK_JITTER_PCT % and time constant CLOCK_JITTER_TAU_S (shared by the batch).
    # 3.6: the original hand launch's SGLang decode log lines (40-step windows) read 47-57 tok/s
    # at accept length 2.98-3.52, a spread of 19.2 % in tok/s against 16.6 % in accept length;
    # the tok/s spread beyond acceptance, sqrt(19.2^2 - 16.6^2) = 9.6 % of the window figure, is
    # step time. 3.6 % gives the emulator's windows that excess (9.7 %, 6,000 simulated windows of
    # the 3-step profile at a coding prompt: 53.3-65.7 tok/s, accept length 3.08-3.70). The time
    # constant is not measured: 2 s keeps it visible at a 2.3 s log window and lets requests a few
    # seconds apart vary independently. 0 turns it off.
    clock_jitter_pct: float = 3.6
    clock_jitter_tau_s: float = 2.0
    prefill_tok_s: float = 3000.0
    base_step_ms: float = 37.45
    spec_overhead_ms: float = 4.0
    spec_step_ms: float = 5.2
    spec_draft_ms: float = 1.0
    accept_probs: List[float] = field(default_factory=lambda: parse_probs(DEFAULT_ACCEPT_PROBS))
    # Position-1 acceptance once the prompt has ACCEPT_CONTEXT_TOKENS tokens, ramping linearly
    # from ACCEPT_PROBS[0] at an empty prompt. 0.83: fitted to the original C=4 run (8 x 1024
    # tokens in 35.1 s = 234 tok/s on ~150-token coding prompts, i.e. AL ~3.35 at the 57 ms
    # cycle); inside llama.cpp's 80-91% at ~100 tokens (vllm#47602 thread).
    accept_p1_context: float = 0.83
    accept_context_tokens: int = 128  # ~the engine's coding prompts (100-200 tokens, as the original's)
    # Healthy decline with context: every p_i x f(n), f = 1 - (1 - F32K) ln(1 + n/knee) /
    # ln(1 + 32768/knee). 0.75: a 3-step AL of 2.39 at 32K (target 2.2-2.5); vllm#47602 reports
    # Qwen3.6-27B position-1 acceptance 93.5% -> 72.1% (x0.771) as the context grows.
    longctx_factor_32k: float = 0.75
    # Prose: drafts are accepted less often on prose and chat than on code (code repeats itself).
    # Every p_i x this for a prompt of 40 words or more with fewer than two code words
    # (request.is_prose). 0.80: a 3-step accept length of 3.39 -> 2.57 (x0.76), as the public
    # Qwen3.6-27B MTP n=3 figures on 2x3090 in noonghunna/club-3090's BENCHMARKS.md: 70.7 tok/s on
    # prose, 93.5 on code (x0.756) with one config, so at the same step time.
    prose_accept_factor: float = 0.80
    longctx_knee_tokens: int = 1024  # decline starts after ~1K tokens (undiminished at ~100)
    # Inside thinking (the tokens before </think>), every p_i of the model's MTP head and an
    # EAGLE-3 chain x this. 0.80: chosen, not measured (no public figure for MTP inside reasoning;
    # reasoning reads as prose, so the prose factor's value).
    thinking_accept_factor: float = 0.80
    # --- drafters (README "Drafters"): calibrations to published figures, not to a winner -----
    # DFLASH: one drafter forward proposes the whole block (draft tokens - 1 positions); position
    # i is accepted with the block size's own p_i if every one before it was
    # (DEFAULT_DFLASH_ACCEPT_BY_BLOCK: its figures and the rule for a block not listed).
    dflash_accept_by_block: Dict[int, List[float]] = field(
        default_factory=lambda: parse_block_table(DEFAULT_DFLASH_ACCEPT_BY_BLOCK))
    # The drafter's work per block. Its weights alone read in 2.26 ms (1.73 B params: the F16
    # GGUF of z-lab/Qwen3.6-27B-DFlash is 3,310.7 MiB; x 2 bytes / (2 GPUs x 768 GB/s)), which
    # would put a block of 4 ahead of NEXTN 3 steps at 32K. 12.2: fitted to vllm-project/recipes
    # PR #839 (a 27B at long context: DFlash with 3 draft tokens behind MTP, 5 needed to beat it):
    # at 32K a block of 4 decodes 0.95 x NEXTN 3 steps and a block of 6 beats it.
    dflash_draft_ms: float = 12.2
    # Each verified token beyond MTP's 4 (the hybrid model's 48 GDN layers update and keep one
    # state per token in verify). 0.5: chosen, not measured: a block of 16 costs 6 ms more.
    dflash_verify_token_ms: float = 0.5
    # DFLASH's decline with context (the same log shape as LONGCTX_FACTOR_32K): 0.75 makes a
    # block of 4 at 32K accept 0.89 x what NEXTN 3 steps accepts there, as vllm-project/recipes
    # PR #839 (a 27B at long context: DFlash 2.5-2.7 against MTP's 2.8-3.0 with 3 tokens). The
    # block of 4's own shortfall (DFLASH_ACCEPT_BY_BLOCK) takes part of that gap, so the decline
    # is MTP's (0.71 while every block drafted at block 16's 0.83).
    dflash_longctx_factor_32k: float = 0.75
    # DFLASH inside thinking: every p_i x this. 0.79: the drafts accepted per verify of a block of
    # 16 fall to 25/60 of thinking off, z-lab/dflash#133 (acceptance 60% off, 25% on).
    dflash_thinking_factor: float = 0.79
    # EAGLE-3 chains: p_i of each draft step. 0.62: a 3-step chain accepts 1 + 0.62 + 0.62^2 +
    # 0.62^3 = 2.24, near the 2.4 the Ex0bit/Qwen3.6-27B-PRISM-EAGLE3 card reports (SGLang 0.5.12,
    # for the PRISM variant of the target; its steps not stated there).
    eagle3_accept_probs: List[float] = field(default_factory=lambda: parse_probs("0.62"))
    # The drafter's own load beside the target's (LOAD_SECONDS x params share); its weights'
    # memory comes off the pools (memory.py) as 1.73 B params in BF16.
    drafter_params_b: float = 1.73
    # The collapse failure mode (0 = off): past this many prompt tokens every p_i = COLLAPSE_PROB.
    # 0.377: 1 + p + p^2 + p^3 = 1.57, sglang#30763's Qwen3.5 accept length past 32K (accept
    # rate 0.19 = 0.57 / 3 drafts).
    longctx_collapse_tokens: int = 0
    longctx_collapse_prob: float = 0.377
    # SGLang NEXTN with the mamba radix cache's extra_buffer strategy: 92% of samples broken once
    # the KV cache was 60% used, none with extra_buffer_lazy or the radix cache off
    # (sgl-project/sglang#36537, open; 0.5.23's auto resolves to extra_buffer). A speculative
    # server whose strategy resolves to extra_buffer garbles the replies it begins while the KV
    # pool's usage is at or above this (the fault corrupt_above_kv, set by the server's own
    # settings). 0 turns the model off.
    extra_buffer_corrupt_kv: float = 0.6
    # Capacity (memory.py): nvidia-smi memory.total of an RTX A6000, and the memory held between
    # weight loading and pool sizing, fitted to the original run at mem 0.92 / ratio 0.4 (a mamba
    # pool of 24 slots, max_running_requests 4; K = 24 for 2300-2760 MiB, this is the middle).
    gpu_memory_mib: float = 49140.0
    pre_pool_reserve_mib: float = 2530.0
    chars_per_token: float = 4.0
    thinking_fraction: float = 0.3
    health_poll_seconds: float = 0.02
    architecture: str = "Qwen3_5ForConditionalGeneration"
    # An answers file (README "Answering"): JSON lines {"prompt", "answer"} or {"prompt", "tools",
    # "call"}; read at start-up into ``answer_rows`` (not a dataclass field: /_emulator/stats
    # shows the path, not the rows).
    answers: str = ""
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
        k.compute_bound_tokens = _get(env, "COMPUTE_BOUND_TOKENS", int, k.compute_bound_tokens)
        k.prefill_tok_s = _get(env, "PREFILL_TOK_S", float, k.prefill_tok_s)
        k.clock_jitter_pct = _get(env, "CLOCK_JITTER_PCT", float, k.clock_jitter_pct)
        k.clock_jitter_tau_s = _get(env, "CLOCK_JITTER_TAU_S", float, k.clock_jitter_tau_s)
        k.base_step_ms = _get(env, "BASE_STEP_MS", float, k.base_step_ms)
        k.spec_overhead_ms = _get(env, "SPEC_OVERHEAD_MS", float, k.spec_overhead_ms)
        k.spec_step_ms = _get(env, "SPEC_STEP_MS", float, k.spec_step_ms)
        k.spec_draft_ms = _get(env, "SPEC_DRAFT_MS", float, k.spec_draft_ms)
        k.accept_probs = _get(env, "ACCEPT_PROBS", parse_probs, k.accept_probs)
        k.accept_p1_context = _get(env, "ACCEPT_P1_CONTEXT", float, k.accept_p1_context)
        k.accept_context_tokens = _get(env, "ACCEPT_CONTEXT_TOKENS", int, k.accept_context_tokens)
        k.longctx_factor_32k = _get(env, "LONGCTX_FACTOR_32K", float, k.longctx_factor_32k)
        k.prose_accept_factor = _get(env, "PROSE_ACCEPT_FACTOR", float, k.prose_accept_factor)
        k.longctx_knee_tokens = _get(env, "LONGCTX_KNEE_TOKENS", int, k.longctx_knee_tokens)
        k.thinking_accept_factor = _get(env, "THINKING_ACCEPT_FACTOR", float, k.thinking_accept_factor)
        if env.get(PREFIX + "DFLASH_ACCEPT_PROB", "").strip():
            raise KnobError("%sDFLASH_ACCEPT_PROB is replaced by %sDFLASH_ACCEPT_BY_BLOCK "
                            "(per block size, e.g. '16:0.83'; README \"Environment knobs\")"
                            % (PREFIX, PREFIX))
        k.dflash_accept_by_block = _get(env, "DFLASH_ACCEPT_BY_BLOCK", parse_block_table,
                                        k.dflash_accept_by_block)
        k.dflash_draft_ms = _get(env, "DFLASH_DRAFT_MS", float, k.dflash_draft_ms)
        k.dflash_verify_token_ms = _get(env, "DFLASH_VERIFY_TOKEN_MS", float, k.dflash_verify_token_ms)
        k.dflash_longctx_factor_32k = _get(env, "DFLASH_LONGCTX_FACTOR_32K", float,
                                           k.dflash_longctx_factor_32k)
        k.dflash_thinking_factor = _get(env, "DFLASH_THINKING_FACTOR", float, k.dflash_thinking_factor)
        k.eagle3_accept_probs = _get(env, "EAGLE3_ACCEPT_PROBS", parse_probs, k.eagle3_accept_probs)
        k.drafter_params_b = _get(env, "DRAFTER_PARAMS_B", float, k.drafter_params_b)
        k.longctx_collapse_tokens = _get(env, "LONGCTX_COLLAPSE_TOKENS", int,
                                         k.longctx_collapse_tokens)
        k.longctx_collapse_prob = _get(env, "LONGCTX_COLLAPSE_PROB", float,
                                       k.longctx_collapse_prob)
        k.extra_buffer_corrupt_kv = _get(env, "EXTRA_BUFFER_CORRUPT_KV", float, k.extra_buffer_corrupt_kv)
        k.gpu_memory_mib = _get(env, "GPU_MEMORY_MIB", float, k.gpu_memory_mib)
        k.pre_pool_reserve_mib = _get(env, "PRE_POOL_RESERVE_MIB", float, k.pre_pool_reserve_mib)
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
        f.wrong_answers = _get(env, "FAULT_WRONG_ANSWERS", float, f.wrong_answers)
        f.corrupt_above_kv = _get(env, "FAULT_CORRUPT_ABOVE_KV", float, f.corrupt_above_kv)
        f.unparsed_tools = _get(env, "FAULT_UNPARSED_TOOLS", int, f.unparsed_tools)
        f.unparsed_reasoning = _get(env, "FAULT_UNPARSED_REASONING", int, f.unparsed_reasoning)
        f.drift_from_token = _get(env, "FAULT_DRIFT_FROM_TOKEN", int, f.drift_from_token)
        for name in ("wrong_answers", "corrupt_above_kv", "unparsed_tools", "unparsed_reasoning",
                     "drift_from_token"):
            value = getattr(f, name)
            if value < 0 or (name in FRACTION_FAULTS and value > 1):
                raise KnobError("%sFAULT_%s must be %s" % (
                    PREFIX, name.upper(), "in [0, 1]" if name in FRACTION_FAULTS else ">= 0"))
        k.answers = _get(env, "ANSWERS", str, k.answers)
        k.answer_rows = {}
        if k.answers:
            try:
                k.answer_rows = load_answers(k.answers)
            except AnswersFileError as exc:
                raise KnobError("%sANSWERS=%s: %s" % (PREFIX, k.answers, exc)) from None
        for name in ("speed_scale", "warmup_factor", "prefill_tok_s", "base_step_ms", "clock_jitter_tau_s",
                     "chars_per_token", "gpu_memory_mib", "longctx_knee_tokens"):
            if getattr(k, name) <= 0:
                raise KnobError("%s%s must be > 0" % (PREFIX, name.upper()))
        if min(k.batch_slowdown, k.warmup_requests, k.clock_jitter_pct, k.longctx_collapse_tokens,
               k.compute_bound_tokens, k.accept_context_tokens, k.pre_pool_reserve_mib) < 0:
            raise KnobError("%sBATCH_SLOWDOWN, WARMUP_REQUESTS, CLOCK_JITTER_PCT, LONGCTX_COLLAPSE_TOKENS, "
                            "ACCEPT_CONTEXT_TOKENS, PRE_POOL_RESERVE_MIB must be >= 0" % PREFIX)
        if min(k.dflash_draft_ms, k.dflash_verify_token_ms, k.drafter_params_b) < 0:
            raise KnobError("%sDFLASH_DRAFT_MS, DFLASH_VERIFY_TOKEN_MS, DRAFTER_PARAMS_B must be >= 0"
                            % PREFIX)
        for name in ("accept_p1_context", "longctx_factor_32k", "longctx_collapse_prob",
                     "extra_buffer_corrupt_kv",
                     "prose_accept_factor", "thinking_accept_factor",
                     "dflash_longctx_factor_32k", "dflash_thinking_factor"):
            if not 0.0 <= getattr(k, name) <= 1.0:
                raise KnobError("%s%s must be in [0, 1]" % (PREFIX, name.upper()))
        if not 0.0 <= k.thinking_fraction < 1.0:
            raise KnobError("%sTHINKING_FRACTION must be in [0, 1)" % PREFIX)
        return k

    def as_dict(self) -> Dict[str, object]:
        d = asdict(self)
        d["faults"] = self.faults.as_dict()
        return d
