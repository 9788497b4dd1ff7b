"""Server families for the tuner's tests: how a server's speed, acceptance, capacity and start-up
follow from its settings, through models the tuner never sees (it only reads what a launch
reports). Each family computes the truth of every setting, and ``outcome`` draws what one launch
of it would show (the objective's interval, the accept length and its acceptance per position,
the capacity figures, the verdict), as bench/tune.py's measurement reports it."""
from __future__ import annotations

import random

from sglang_perf.judge import tune


class Family(object):
    """``accept``: {kind: per-position conditional acceptance}, for a block either one list for
    every block or {block size: its own list} (DFlash drafts a block at once: a block of 8 need not
    accept what the first 7 positions of a block of 16 do); ``step_ms``: {kind: (fixed ms,
    ms per draft token)} at C=1; ``target_ms``: a verify of the target alone (no speculation);
    ``kv_per_frac``: KV tokens per 0.01 of fraction above ``kv_zero`` (the fraction at which the
    KV share is empty), less ``drafter_frac`` for a drafter; ``oom_above``: {kind: the highest
    fraction that starts}; ``adaptive_loss``: adaptive's speed against the best of its steps."""

    def __init__(self, name, accept, step_ms, target_ms, kv_zero=0.62, kv_per_frac=6000, drafter_frac=0.0,
                 oom_above=None, adaptive_loss=0.97, min_tok_s=40.0, min_accept_len=1.0,
                 need_ctx=131072, need_run=4, spread=0.02, mem_speed=None, oom_says=True):
        self.name, self.accept, self.step_ms, self.target_ms = name, accept, step_ms, target_ms
        self.kv_zero, self.kv_per_frac, self.drafter_frac = kv_zero, kv_per_frac, drafter_frac
        self.oom_above = oom_above or {}
        self.adaptive_loss = adaptive_loss
        self.min_tok_s, self.min_accept_len = min_tok_s, min_accept_len
        self.need_ctx, self.need_run = need_ctx, need_run
        self.spread = spread
        self.mem_speed = mem_speed  # optional: speed x mem_speed(fraction)
        self.oom_says = oom_says  # False: a failed start's log names no memory error

    # -- the truth ---------------------------------------------------------------------------
    def positions(self, kind, n):
        """Share of verifies that accept position k (cumulative products of the conditionals)."""
        out, p = [], 1.0
        probs = self.accept[kind]
        if isinstance(probs, dict):  # a block size's own
            probs = probs[n + 1]
        for k in range(n):
            p *= probs[min(k, len(probs) - 1)]
            out.append(p)
        return out

    def fixed(self, kind, depth):
        """(tok/s, accept length, per position) of a non-adaptive setting, at any fraction."""
        if kind == "none":
            return 1000.0 / self.target_ms, 1.0, None
        n = depth if kind == "chain" else depth - 1
        pos = self.positions(kind, n)
        al = 1.0 + sum(pos)
        fixed_ms, per_token = self.step_ms[kind]
        tokens = depth + 1 if kind == "chain" else depth
        return al * 1000.0 / (self.target_ms + fixed_ms + per_token * tokens), al, pos

    def truth(self, key):
        """What the setting really does: {starts, capacity_ok, tok_s, accept_len, by_position, passes}."""
        engine, kind, depth, adaptive, mem = key[:5]  # a setting.Named: its profile name beside
        if adaptive:  # settles on the best of SGLang's bs1 candidate steps up to its own range
            steps = [s for s in (1, 3, 5, 7)]
            tok_s, al, pos = max((self.fixed("chain", s) for s in steps), key=lambda r: r[0])
            tok_s *= self.adaptive_loss
        else:
            tok_s, al, pos = self.fixed(kind, depth)
        if self.mem_speed:
            tok_s *= self.mem_speed(mem)
        starts = mem <= self.oom_above.get(kind, 1.0)
        drafter = self.drafter_frac if kind == "block" else 0.0
        kv = int(max(0.0, (mem - self.kv_zero - drafter) * 100 * self.kv_per_frac))
        running = max(0, int((mem - self.kv_zero - drafter) * 100))
        cap_ok = kv >= self.need_ctx and running >= self.need_run
        passes = starts and cap_ok and tok_s >= self.min_tok_s and al >= self.min_accept_len
        return {"starts": starts, "capacity_ok": cap_ok, "kv": kv, "running": running, "tok_s": tok_s,
                "accept_len": al, "by_position": pos, "passes": passes}

    def best(self, keys, refused=()):
        """The fastest setting that passes (the truth), or None."""
        ok = [(self.truth(k)["tok_s"], k) for k in keys if k not in refused and self.truth(k)["passes"]]
        return max(ok)[1] if ok else None

    def capacity_model(self, key, mem):
        """What a memory model (not the family's own) estimates: the right slope, an offset."""
        drafter = self.drafter_frac if key[1] == "block" else 0.0
        return (int((mem - self.kv_zero - drafter) * 100 * self.kv_per_frac) + 5000,
                int((mem - self.kv_zero - drafter) * 100))

    # -- one launch ----------------------------------------------------------------------------
    def outcome(self, key, bar=0.0, rnd=None):
        """What a launch shows, as bench/tune.py reports it; stopped early when its upper bound is
        under ``bar``."""
        rnd = rnd or random.Random(0)
        t = self.truth(key)
        if not t["starts"]:
            if not self.oom_says:
                return {"started": False, "memory": None, "error": "exited with status 1 (stand-in)"}
            return {"started": False, "memory": "over",
                    "error": "torch.OutOfMemoryError: CUDA out of memory (stand-in)"}
        est = t["tok_s"] * (1 + rnd.gauss(0, self.spread / 3))
        iv = {"estimate": est, "lower": est * (1 - self.spread), "upper": est * (1 + self.spread)}
        out = {"started": True, "tok_s": iv, "accept_len": t["accept_len"], "by_position": t["by_position"],
               "capacity": {"effective_context": t["kv"], "max_running_requests": t["running"]}}
        if iv["upper"] < bar:
            return dict(out, stopped="slower", passed=False)
        fails = []
        if est < self.min_tok_s:
            fails.append("coding")
        if not t["capacity_ok"]:  # and the concurrent case, run on fewer requests at once than it needs
            fails += ["capacity"] + (["concurrent"] if t["running"] < self.need_run else [])
        out["failed_capacity"] = not t["capacity_ok"]
        return dict(out, passed=not fails, failed_cases=fails)


def run(family, keys, current, refused=None, budget=12, seed=0):
    """The tuner against ``family``: (tuner, answer)."""
    rnd = random.Random(seed)
    tuner = tune.Tuner(keys, current, refused=refused, capacity_model=family.capacity_model,
                       needs=(family.need_ctx, family.need_run), budget=budget)
    while True:
        key = tuner.next()
        if key is None:
            break
        tuner.record(key, family.outcome(key, bar=tuner.bar(), rnd=rnd))
    return tuner, tuner.answer()
