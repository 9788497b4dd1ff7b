"""The emulated GPU: one asyncio batch-scheduler loop, like SGLang's scheduler.

A waiting queue and a running batch of at most max_running_requests. Each iteration admits
waiting requests (prefill: prompt_tokens / PREFILL_TOK_S of step time; each admitted request
emits exactly one token at the end of the step), then runs one decode (or verify) step for the
requests that were already running:

    step_time = (cycle_time * (1 + BATCH_SLOWDOWN * (B - 1)) * max(1, B * D / COMPUTE_BOUND_TOKENS)
                 + sum over the batch of context_tokens * KV bytes per token / 768 GB/s)
                / SPEED_SCALE   (/ WARMUP_FACTOR)          (D: tokens per request per forward)

Admission follows SGLang's limits: at most the effective max_running_requests (memory.py) run at
once, and a waiting request is admitted only when its prompt plus min(max_new_tokens, 4096) fits
in the KV tokens the running requests do not hold (a simple form of PrefillAdder.add_one_req).
Verify steps sample accepted draft tokens position by position. Deadlines are absolute
(next = previous + step_time) so sleep jitter does not accumulate; the emission timestamps that
the stats record are the real ones. Streaming output is written from this loop directly (no task
per token, no task per request per step); a client that does not read falls back to its own
handler coroutine so it can never stall the batch.
"""
from __future__ import annotations

import asyncio
import logging
import math
import os
import random
import sys
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List

from . import memory
from .adaptive import AdaptiveSteps
from .knobs import Knobs, dflash_block_probs
from .request import EOS_TOKEN_ID, Req

logger = logging.getLogger("sglang.srt.managers.scheduler")

# One RTX A6000's memory bandwidth (NVIDIA datasheet: 768 GB/s); decode reads the KV cache of
# the context once per forward.
GPU_BANDWIDTH_BYTES_S = 768e9


def accepted(probs: List[float], rnd: Callable[[], float]) -> int:
    """Draft tokens one verify step accepts: position i with probability probs[i], only if every
    one before it was."""
    acc = 0
    for p in probs:
        if rnd() < p:
            acc += 1
        else:
            break
    return acc


class ClockJitter:
    """The GPU's clock and thermal jitter on step time (knobs.py CLOCK_JITTER_PCT): factor(dt)
    advances an AR(1) process x by one step of ``dt`` seconds and returns exp(x)."""

    def __init__(self, pct: float, tau_s: float, seed: int):
        self.sigma = pct / 100.0
        self.tau = tau_s
        self.rng = random.Random(seed * 104729 + 3)
        self.x = self.rng.gauss(0.0, self.sigma) if self.sigma else 0.0

    def factor(self, dt: float) -> float:
        if not self.sigma:
            return 1.0
        rho = math.exp(-dt / self.tau)
        self.x = rho * self.x + math.sqrt(1.0 - rho * rho) * self.sigma * self.rng.gauss(0.0, 1.0)
        return math.exp(self.x)


class Scheduler:
    def __init__(self, cfg: Dict[str, Any], knobs: Knobs, metrics, log_prefix: str,
                 capacity: memory.Capacity | None = None):
        self.cfg = cfg
        self.knobs = knobs
        self.metrics = metrics
        self.log_prefix = log_prefix
        self.rng = random.Random(knobs.seed)
        # the clock jitter's own draws: acceptance stays the same sequence for a seed
        self.clock = ClockJitter(knobs.clock_jitter_pct, knobs.clock_jitter_tau_s, knobs.seed)
        if capacity is None:
            capacity = memory.compute(cfg, knobs.gpu_memory_mib, knobs.pre_pool_reserve_mib,
                                      knobs.drafter_params_b)
        self.capacity = capacity
        # the pools SGLang sized (memory.py): what the scheduler actually runs with
        self.max_running = int(capacity.max_running_requests)
        self.max_total_tokens = int(capacity.max_total_num_tokens)
        self.max_req_input_len = int(capacity.max_req_input_len)
        self.mamba_slots = int(capacity.max_mamba_cache_size or 0)
        self.spec = cfg["speculative_algorithm"] is not None
        self.algorithm = str(cfg["speculative_algorithm"]).upper() if self.spec else None
        self.steps = int(cfg["speculative_num_steps"] or 0) if self.spec else 0
        self.draft_tokens = int(cfg["speculative_num_draft_tokens"] or 0) if self.spec else 0
        # sgl-project/sglang#36537's model (knobs.py EXTRA_BUFFER_CORRUPT_KV): speculation over the
        # extra_buffer strategy corrupts replies at a full enough KV cache
        self.extra_buffer_corrupt_kv = knobs.extra_buffer_corrupt_kv \
            if self.spec and cfg.get("mamba_radix_cache_strategy") == "extra_buffer" else 0.0
        k = knobs
        # SGLang's adaptive speculation (README "Adaptive steps"): the draft steps of each batch
        self.adaptive = AdaptiveSteps(self.steps, cfg.get("speculative_adaptive_config")) \
            if self.spec and cfg.get("speculative_adaptive") else None
        if self.algorithm == "DFLASH":
            self.steps = max(1, self.draft_tokens - 1)  # the block's draft positions
            # the block size's own p_i (non-causal drafting: not a prefix of a larger block's)
            probs = dflash_block_probs(k.dflash_accept_by_block, self.draft_tokens)
        elif self.algorithm == "EAGLE3":
            probs = list(k.eagle3_accept_probs)
        else:
            probs = list(k.accept_probs)
        depth = max(self.steps, self.adaptive.max_steps if self.adaptive else 0) if self.spec else 0
        while probs and len(probs) < depth:
            probs.append(probs[-1])
        self.base_probs = probs[:depth]
        self.longctx_32k = k.dflash_longctx_factor_32k if self.algorithm == "DFLASH" \
            else k.longctx_factor_32k
        self.thinking_factor = k.dflash_thinking_factor if self.algorithm == "DFLASH" \
            else k.thinking_accept_factor
        self.cycle_s = self.cycle_for(self.steps)
        # tokens each running request puts through a verify (draft tokens) or decode forward
        self.tokens_per_forward = self.draft_tokens if self.spec else 1
        # seconds per context token per forward: the KV bytes of the attention layers (target,
        # plus the MTP layer per draft step and draft extend) read at the GPU's bandwidth
        self.attn_s_per_token = memory.attention_bytes_per_context_token(cfg) / GPU_BANDWIDTH_BYTES_S
        # an adaptive server's: the MTP layer's reads follow the steps its slot runs
        run = {n for c in self.adaptive.candidates().values() for n in c} if self.adaptive else ()
        self.attn_s_per_token_at = {
            n: memory.attention_bytes_per_context_token(cfg, n) / GPU_BANDWIDTH_BYTES_S for n in run}
        self.waiting: Deque[Req] = deque()
        self.running: List[Req] = []
        self.wake = asyncio.Event()
        self.stopping = False
        self.on_step_hooks: List[Callable[[], None]] = []
        self.crash_hook: Callable[[Req], None] | None = None
        # vLLM's accounting (v1/core/sched/scheduler.py update_from_output): a verify step's
        # histogram bucket is the drafts the sampler accepted, before the output is cut at
        # max_tokens; SGLang counts only the emitted ones. on_verify(req, accepted) sees each.
        self.hist_untruncated = False
        self.on_verify: Callable[[Req, int], None] | None = None
        # counters
        self.requests: List[Req] = []
        self.totals = {"generation_tokens": 0, "verify_steps": 0, "requests": 0,
                       "health_requests": 0, "decode_steps": 0, "prefill_tokens": 0,
                       "kv_admission_waits": 0, "refused_requests": 0}
        self.generation_requests_seen = 0  # since start, for warmup
        self.forward_ct_decode = 0
        self.interval_tokens = 0
        self.interval_accept_tokens = 0
        self.interval_forward_ct = 0
        self.interval_correct = 0
        self.total_accept_tokens = 0
        self.total_forward_ct = 0
        self.last_log_tic = time.perf_counter()
        self.last_gen_throughput = 0.0
        self.avg_spec_accept_length: float | None = None
        self.last_input_tic = time.perf_counter()

    def cycle_for(self, steps: int) -> float:
        """Seconds of one verify cycle at ``steps`` draft steps (0: a plain decode step): the
        target's forward, the speculative overhead, and the drafting (MTP or EAGLE-3: one head
        forward per step; DFLASH: one drafter forward per block, plus each verified token beyond
        MTP's 4)."""
        k = self.knobs
        if not self.spec or steps <= 0:
            return k.base_step_ms / 1000.0
        if self.algorithm == "DFLASH":
            ms = (k.base_step_ms + k.spec_overhead_ms + k.dflash_draft_ms
                  + k.dflash_verify_token_ms * max(0, self.draft_tokens - 4))
        else:
            ms = (k.base_step_ms + k.spec_overhead_ms + k.spec_step_ms * steps
                  + k.spec_draft_ms * max(0, self.draft_tokens - self.steps - 1))
        return ms / 1000.0

    # -- configuration summary for /_emulator/stats ----------------------------------------
    def expected_accept_length(self, prompt_tokens: int = 0, thinking: bool = False) -> float:
        if not self.spec:
            return 1.0
        exp, acc = 1.0, 1.0
        for p in self._probs_for(prompt_tokens, thinking=thinking)[:self.steps]:
            acc *= p
            exp += acc
        return exp

    def longctx_factor(self, prompt_tokens: int) -> float:
        """The healthy decline of acceptance with context (knobs.py, README): 1 at an empty
        prompt, LONGCTX_FACTOR_32K at 32768 tokens, log-shaped (slow past a few thousand)."""
        k = self.knobs
        knee = float(k.longctx_knee_tokens)
        drop = (1.0 - self.longctx_32k) * math.log1p(prompt_tokens / knee) \
            / math.log1p(32768.0 / knee)
        return min(1.0, max(0.3, 1.0 - drop))

    def collapses(self, prompt_tokens: int) -> bool:
        threshold = self.knobs.longctx_collapse_tokens
        return bool(threshold) and prompt_tokens > threshold

    def _probs_for(self, prompt_tokens: int, prose: bool = False, thinking: bool = False) -> List[float]:
        k = self.knobs
        if not self.base_probs:
            return []
        if self.collapses(prompt_tokens):
            return [k.longctx_collapse_prob] * len(self.base_probs)
        probs = list(self.base_probs)
        if self.algorithm not in ("DFLASH", "EAGLE3"):  # the MTP head's first position
            ramp = min(1.0, prompt_tokens / float(k.accept_context_tokens)) \
                if k.accept_context_tokens else 1.0
            probs[0] = probs[0] + (max(probs[0], k.accept_p1_context) - probs[0]) * ramp
        factor = self.longctx_factor(prompt_tokens) * (k.prose_accept_factor if prose else 1.0) \
            * (self.thinking_factor if thinking else 1.0)
        return [min(1.0, p * factor) for p in probs]

    def decode_tok_s_at(self, prompt_tokens: int) -> float:
        """Expected C=1 decode speed for a prompt of that length (tokens/s, SPEED_SCALE 1)."""
        step = self.cycle_s + prompt_tokens * self.attn_s_per_token
        return self.expected_accept_length(prompt_tokens) / step

    def configured(self) -> Dict[str, Any]:
        k = self.knobs
        al = self.expected_accept_length(0)
        return {
            "cycle_time_s": self.cycle_s,
            "decode_step_s_at_b1": self.cycle_s / k.speed_scale,
            "warmup_step_s_at_b1": self.cycle_s / k.speed_scale / k.warmup_factor,
            "attention_s_per_context_token": self.attn_s_per_token,
            "speed_scale": k.speed_scale,
            "seed": k.seed,
            "batch_slowdown": k.batch_slowdown,
            "compute_bound_tokens": k.compute_bound_tokens,
            "prefill_tok_s": k.prefill_tok_s * k.speed_scale,
            "accept_probs": list(self.base_probs),
            "speculative": self.spec,
            "speculative_algorithm": self.algorithm,
            "adaptive_candidate_steps": self.adaptive.candidates() if self.adaptive else None,
            "expected_accept_length_thinking": self.expected_accept_length(k.accept_context_tokens, True),
            "speculative_num_steps": self.steps or None,
            "speculative_num_draft_tokens": self.draft_tokens or None,
            "expected_accept_length_short_context": al,
            "expected_accept_length_coding_prompt": self.expected_accept_length(
                k.accept_context_tokens),
            "expected_accept_length_32k_context": self.expected_accept_length(32768),
            "longctx_collapse_tokens": k.longctx_collapse_tokens or None,
            "expected_accept_length_collapsed": (
                1.0 + sum(k.longctx_collapse_prob ** (i + 1) for i in range(self.steps))
                if self.spec else 1.0),
            "nominal_c1_decode_tok_s": al / self.cycle_s * k.speed_scale,
            "nominal_c1_decode_tok_s_32k_context": self.decode_tok_s_at(32768) * k.speed_scale,
            "max_running_requests": self.max_running,
            "max_total_num_tokens": self.max_total_tokens,
            "max_req_input_len": self.max_req_input_len,
            "max_mamba_cache_size": self.capacity.max_mamba_cache_size,
            "capacity": self.capacity.as_dict(),
        }

    # -- admission ---------------------------------------------------------------------------
    def new_request_number(self) -> int:
        self.generation_requests_seen += 1
        return self.generation_requests_seen

    def submit(self, req: Req) -> None:
        req.index = len(self.requests)
        self.requests.append(req)
        self.totals["requests"] += 1
        if req.health:
            self.totals["health_requests"] += 1
        req.probs = self._probs_for(req.prompt_tokens, req.prose)
        req.collapsed = self.spec and self.collapses(req.prompt_tokens)
        if req.reasoning and (req.limit > 2 or (req.script is not None and req.max_tokens > 2)):
            req.think_len = max(2, int(round(self.knobs.thinking_fraction * req.max_tokens)))
            # drafts inside thinking: a chat request the template put into thinking mode (the
            # raw /generate and completions text carries the tags but no chat template)
            req.think_probs = self._probs_for(req.prompt_tokens, req.prose, thinking=True) \
                if req.endpoint.endswith("chat/completions") else req.probs
        req.place_script()
        if not req.health and not req.exempt:
            req.drift_from = self.knobs.faults.drift_from_token
        self.waiting.append(req)
        self.wake.set()

    def cap_max_new_tokens(self, prompt_tokens: int, max_new_tokens: int) -> int:
        """scheduler.py init_req_max_new_tokens: max_new_tokens <= max_req_len - input - 1 (it
        bites when --context-length exceeds the KV pool)."""
        return max(1, min(int(max_new_tokens), self.capacity.max_req_len - prompt_tokens - 1))

    def record_refused(self, req: Req) -> None:
        """A request the scheduler aborted at admission (too long): in the stats, never run."""
        req.index = len(self.requests)
        self.requests.append(req)
        self.totals["requests"] += 1
        self.totals["refused_requests"] += 1

    def reset_counters(self) -> None:
        for req in self.requests:
            req.index = -1
        self.requests = []
        for key in self.totals:
            self.totals[key] = 0

    def active_spec_config(self) -> tuple:
        """(steps, draft tokens) the draft worker runs now (metrics_reporter.py
        _active_spec_config_snapshot; (0, 0) without speculation): the resolved ones (DFLASH:
        steps 1, the block), an adaptive server's active steps and steps + 1."""
        if not self.spec:
            return 0, 0
        if self.adaptive is not None:
            return self.adaptive.active, self.adaptive.active + 1
        return int(self.cfg["speculative_num_steps"] or 0), self.draft_tokens

    def steps_now(self, batch: int) -> int:
        """The draft steps of a verify of ``batch`` requests (adaptive: its batch size's slot)."""
        return self.adaptive.steps_for(batch) if self.adaptive else self.steps

    def step_seconds(self, batch: int, context_tokens: int, steps: int | None = None) -> float:
        """One decode/verify forward of ``batch`` running requests holding ``context_tokens``
        tokens in all (README "Timing"), clock jitter included (warmup aside); ``steps``: the
        draft steps of an adaptive server's current slot."""
        k = self.knobs
        base = self.cycle_s if steps is None else self.cycle_for(steps)
        cycle = base * (1.0 + k.batch_slowdown * (batch - 1))
        if k.compute_bound_tokens:
            tokens = batch * (self.tokens_per_forward if steps is None else steps + 1)
            if tokens > k.compute_bound_tokens:
                cycle *= tokens / float(k.compute_bound_tokens)
        attn = self.attn_s_per_token if steps is None else self.attn_s_per_token_at[steps]
        dt = (cycle + context_tokens * attn) / k.speed_scale
        return dt * self.clock.factor(dt)

    def simulate_decode(self, prompt_tokens: int, max_tokens: int) -> Dict[str, float]:
        """One request alone on the server in virtual time, drawn as the live loop draws it
        (acceptance per verify step, step_seconds): {"completion_tokens", "verify_ct",
        "decode_s"} (first token to last). For the gate's error-rate tests (thousands of
        requests that would take hours live)."""
        probs = self._probs_for(prompt_tokens)
        produced, verify, t = 1, 0, 0.0
        while produced < max_tokens:
            t += self.step_seconds(1, prompt_tokens + produced)
            n = 1 + accepted(probs, self.rng.random) if self.spec else 1
            produced += min(n, max_tokens - produced)
            verify += 1 if self.spec else 0
        return {"completion_tokens": produced, "verify_ct": verify, "decode_s": t}

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        k = self.knobs
        deadline = time.monotonic()
        while not self.stopping:
            if not self.running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                deadline = time.monotonic()
                continue
            new: List[Req] = []
            prefill_s = 0.0
            held = None
            while self.waiting and len(self.running) + len(new) < self.max_running:
                req = self.waiting[0]
                if req.closed:
                    self.waiting.popleft()
                    continue
                if held is None:
                    held = sum(r.kv_reserved() for r in self.running)
                need = req.kv_reserved()
                if held + need > self.max_total_tokens and (self.running or new):
                    # PrefillAdder NO_TOKEN: the head of the queue waits for KV (FCFS)
                    self.totals["kv_admission_waits"] += 1
                    break
                self.waiting.popleft()
                held += need
                new.append(req)
                prefill_s += req.prompt_tokens / (k.prefill_tok_s * k.speed_scale)
            decode = list(self.running)
            step = prefill_s
            if decode:
                dt = self.step_seconds(len(decode), sum(r.prompt_tokens + r.produced for r in decode),
                                       self.steps_now(len(decode)) if self.adaptive else None)
                for r in decode:
                    if r.warmup:
                        dt /= k.warmup_factor
                        break
                step += dt
            deadline += step
            now = time.monotonic()
            if deadline > now:
                await asyncio.sleep(deadline - now)
            else:
                if now - deadline > 0.25:
                    deadline = now  # fell far behind (overloaded host): do not burst
                await asyncio.sleep(0)
            t = time.monotonic()
            await self._finish_step(t, new, decode)

    async def _finish_step(self, t: float, new: List[Req], decode: List[Req]) -> None:
        emitted: List[tuple] = []
        rnd = self.rng.random
        spec = self.spec
        step_tokens = 0
        step_accept = 0
        step_fwd = 0
        step_correct = 0
        stall_after = self.knobs.faults.stall_after_tokens
        steps = self.steps_now(len(decode)) if spec else 0
        drafted: List[int] = []
        for r in decode:
            if r.closed:
                continue
            if r.stall_until:
                if t < r.stall_until:
                    continue
                r.stall_until = 0.0
            start = r.produced
            remaining = r.limit - start
            if spec:  # a verify even at 0 steps (adaptive): no drafts, the target's token
                probs = r.think_probs if start < r.think_len else r.probs
                acc = accepted(probs[:steps], rnd)
                drafted.append(acc)
                n = 1 + acc
                if n > remaining:
                    n = remaining
                r.verify_ct += 1
                good = acc if self.hist_untruncated else n - 1
                if self.on_verify is not None:
                    self.on_verify(r, acc)
                r.correct += good
                hist = r.hist
                while len(hist) <= good:
                    hist.append(0)
                hist[good] += 1
                step_accept += n
                step_fwd += 1
                step_correct += good
            else:
                n = 1
            r.produced = start + n
            step_tokens += n
            emitted.append((r, start))
        if self.adaptive is not None and drafted:
            self.adaptive.on_verify(drafted, len(decode))
        for r in new:
            r.t_admit = t
            r.produced = 1
            emitted.append((r, 0))
        if decode:
            self.forward_ct_decode += 1
            self.totals["decode_steps"] += 1
        self.totals["generation_tokens"] += step_tokens + len(new)
        self.totals["verify_steps"] += step_fwd
        self.interval_tokens += step_tokens
        self.interval_accept_tokens += step_accept
        self.interval_forward_ct += step_fwd
        self.interval_correct += step_correct
        running_before = len(self.running)
        self.running.extend(new)
        if new:
            # SGLang reports a prefill batch after its forward (batch_result_processor.py
            # report_prefill_stats): the pool's usage then holds the new requests
            self._log_prefill(new, t, running_before)
        threshold = self.knobs.faults.corrupt_above_kv or self.extra_buffer_corrupt_kv
        if threshold > 0 and emitted:
            # FAULT_CORRUPT_ABOVE_KV: a reply not yet begun is garbled while the KV pool's usage
            # (token_usage, the running requests included) is at or above the threshold
            usage = self.token_usage()
            if usage >= threshold:
                for r, start in emitted:
                    if r.script is not None and not r.corrupt and not r.exempt \
                            and start <= r.script_at:
                        r.corrupt = True

        crash_req = None
        for r, start in emitted:
            if r.t_first is None:
                r.t_first = t
                if r.log_metrics:
                    self.metrics.observe_ttft(t - r.t_arrival, r.stream)
            elif r.log_metrics:
                self.metrics.observe_itl(t - r.t_last, r.produced - start)
            r.t_last = t
            faults = self.knobs.faults
            if r.produced >= r.limit:
                if r.eos_at is not None and r.produced >= r.eos_at:
                    r.finish = {"type": "stop", "matched": EOS_TOKEN_ID}
                else:
                    r.finish = {"type": "length", "length": r.max_tokens}
                r.t_finish = t
            elif not r.exempt and not r.health:
                if faults.truncate_after_tokens and r.produced >= faults.truncate_after_tokens:
                    r.fault = "truncate"
                elif (stall_after and not r.stall_done and r.produced >= stall_after
                      and faults.stall_seconds > 0):
                    r.stall_done = True
                    r.stall_until = t + faults.stall_seconds
                    if r.fault is None:
                        r.fault = "stall"
            if r.extra.get("crash_at_first_token") and crash_req is None:
                crash_req = r
            if r.finish is not None and r.log_metrics:
                r.counted = True
                self.metrics.observe_finished(r, t)
            await r.sink.on_step(r, start)
        if self.running:
            self.running = [r for r in self.running
                            if r.finish is None and not r.closed and r.fault != "truncate"]
        if decode and self.forward_ct_decode % max(1, self.cfg["decode_log_interval"]) == 0:
            self._log_decode()
        for hook in self.on_step_hooks:
            hook()
        if crash_req is not None and self.crash_hook is not None:
            self.crash_hook(crash_req)

    def abort(self, req: Req) -> None:
        """Client went away: SGLang aborts the request (finish_reason abort)."""
        if req.closed:
            return
        req.closed = True
        if req.finish is None:
            req.finish = {"type": "abort", "message": "Abort before/while running",
                          "status_code": None, "err_type": None}
            req.t_finish = time.monotonic()
            if req.log_metrics and req.fault is None:
                req.counted = True
                self.metrics.observe_finished(req, req.t_finish)

    # -- pools and logs ----------------------------------------------------------------------
    def kv_used(self) -> int:
        return sum(r.prompt_tokens + r.produced for r in self.running)

    def mamba_used(self) -> int:
        # each running request holds its state slot plus the extra_buffer ping-pong slots
        per_req = max(1, self.capacity.mamba_ratio - 2) if self.mamba_slots else 0
        return len(self.running) * per_req

    def usage_parts(self, decode: bool) -> List[str]:
        used = self.kv_used()
        usage = used / float(self.max_total_tokens)
        mamba_num = self.mamba_used()
        mamba_usage = mamba_num / float(self.mamba_slots) if self.mamba_slots else 0.0
        if decode:
            return [f"#full token: {used}", f"full token usage: {usage:.2f}",
                    f"mamba num: {mamba_num}", f"mamba usage: {mamba_usage:.2f}"]
        return [f"full token usage: {usage:.2f}", f"mamba usage: {mamba_usage:.2f}"]

    def token_usage(self) -> float:
        return round(self.kv_used() / float(self.max_total_tokens), 2)

    def _log_prefill(self, new: List[Req], t: float, running: int | None = None) -> None:
        tokens = sum(r.prompt_tokens for r in new)
        now = time.perf_counter()
        gap = max(1e-6, now - self.last_input_tic)
        self.last_input_tic = now
        msg = (f"Prefill batch, #new-seq: {len(new)}, #new-token: {tokens}, #cached-token: 0, "
               + ", ".join(self.usage_parts(False)) + ", "
               + f"#running-req: {len(self.running) if running is None else running}, "
               + f"#queue-req: {len(self.waiting)}, "
               + "#pending-token: 0, cuda graph: False, "
               + f"input throughput (token/s): {tokens / gap:.2f}")
        logger.info(msg)
        self.metrics.set_scheduler_gauges(self)

    def _log_decode(self) -> None:
        now = time.perf_counter()
        gap = max(1e-6, now - self.last_log_tic)
        self.last_log_tic = now
        self.last_gen_throughput = self.interval_tokens / gap
        self.interval_tokens = 0
        msg = f"Decode batch, #running-req: {len(self.running)}, " + \
            ", ".join(self.usage_parts(True)) + ", "
        if self.spec:
            fwd = self.interval_forward_ct
            al = self.interval_accept_tokens / fwd if fwd else 0.0
            # metrics_reporter.py: the drafts per round of the draft tokens active now (an
            # adaptive server's last verify's: get_spec() carries its runtime override)
            steps, draft_tokens = self.active_spec_config()
            total_draft = fwd * (draft_tokens - 1 if draft_tokens else steps)
            rate = self.interval_correct / total_draft if total_draft > 0 else 0.0
            self.total_accept_tokens += self.interval_accept_tokens
            self.total_forward_ct += fwd
            if self.total_forward_ct:
                self.avg_spec_accept_length = self.total_accept_tokens / self.total_forward_ct
            self.interval_accept_tokens = self.interval_correct = self.interval_forward_ct = 0
            self.metrics.spec_accept_length = al
            self.metrics.spec_accept_rate = rate
            # _active_spec_config_snapshot (only on this path: a prefill report leaves them)
            self.metrics.spec_num_steps, self.metrics.spec_num_draft_tokens = steps, draft_tokens
            msg += f"accept len: {al:.2f}, accept rate: {rate:.2f}, "
        msg += (f"cuda graph: True, gen throughput (token/s): {self.last_gen_throughput:.2f}, "
                f"#queue-req: {len(self.waiting)}")
        logger.info(msg)
        self.metrics.gen_throughput = self.last_gen_throughput
        self.metrics.set_scheduler_gauges(self)


def crash_now(req: Req) -> None:
    """FAULT_CRASH_AFTER_REQUESTS: die like a scheduler that hit a CUDA error."""
    sys.stderr.write("[%s] Scheduler hit an exception: RuntimeError: CUDA error: an illegal "
                     "memory access was encountered (emulated fault "
                     "SGLEMU_FAULT_CRASH_AFTER_REQUESTS, request %s)\n"
                     % (time.strftime("%Y-%m-%d %H:%M:%S"), req.rid))
    sys.stderr.flush()
    os._exit(1)
