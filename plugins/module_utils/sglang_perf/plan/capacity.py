"""What the hardware allows: the decode bandwidth roofline and the per-GPU memory budget.

Both are arithmetic on two small dicts the inventory carries (see MODEL_KEYS, HARDWARE_KEYS), so
every figure can be recomputed by hand; the returned dicts hold the inputs, each step and a
one-line ``formula``.

Roofline. Decoding one token without speculation reads every weight once, so a server cannot
decode one stream faster than ``GPUs x bandwidth / weight bytes``. With NEXTN/MTP speculation one
verify cycle reads the weights once plus, per draft step, the MTP layer and the LM head, and yields
``accept length`` tokens:

    ceiling tok/s = gpu_count x gpu_bandwidth_gbs / bytes per verify cycle x accept length
    bytes per verify cycle = (params + steps x (mtp_layer_params + lm_head_params)) x dtype bytes

Memory budget (per GPU, GiB = 2**30 bytes, the unit SGLang's logs call GB). SGLang reserves
``mem_fraction_static`` of the GPU for weights and caches; what is left after the weights is split
between the mamba (linear attention) state pool and the KV cache by ``mamba_full_memory_ratio``
(r): mamba gets r / (1 + r), KV gets 1 / (1 + r) (srt/mem_cache/kv_cache_configurator.py). Each
running request needs its mamba state plus, with speculation, one intermediate state per draft
token (srt/mem_cache/memory_pool.py). The estimate fails when the weights do not fit, when the
mamba share holds no request, or when the KV share cannot hold ``context_length`` tokens for
``kv_full_context_requests`` requests.
"""
from __future__ import annotations

GIB = float(1 << 30)

# The model's size figures (params in billions; bytes for the cache figures, all GPUs together).
MODEL_KEYS = {
    "params_b": "all weights, read once per forward pass",
    "dtype_bytes": "bytes per weight (BF16: 2)",
    "lm_head_params_b": "LM head (vocab x hidden), read once per draft step",
    "mtp_layer_params_b": "the MTP decoder layer, read once per draft step",
    "mtp_params_b": "the draft module as loaded (MTP layer + its embedding + its LM head)",
    "kv_bytes_per_token": "KV cache bytes per token over all full-attention layers",
    "mamba_state_bytes_per_request": "linear-attention (mamba) state bytes per request",
    "context_length_max": "the model's own maximum context (SGLang's default context length)",
}
HARDWARE_KEYS = {
    "gpu_count": "GPUs serving the model (tensor parallel)",
    "gpu_bandwidth_gbs": "memory bandwidth per GPU, GB/s (10**9 bytes)",
    "gpu_memory_gib": "memory per GPU, GiB",
    "compute_capability": "the GPUs' CUDA compute capability (RTX A6000: 8.6), what their kernels can run",
}
# When the profile leaves them to SGLang (its own defaults, server_args.py).
SGLANG_MAMBA_FULL_MEMORY_RATIO = 0.9
SGLANG_SPEC_MAX_RUNNING_REQUESTS = 48


class CapacityError(ValueError):
    """A missing or impossible size figure, named."""


def _figures(d, keys, what, required):
    if not isinstance(d, dict):
        raise CapacityError("%s must be a dict with %s, got %r" % (what, ", ".join(keys), d))
    unknown = sorted(set(d) - set(keys))
    if unknown:
        raise CapacityError("%s: unknown key %s (known: %s)" % (what, unknown[0], ", ".join(keys)))
    out = {}
    for key in keys:
        value = d.get(key)
        if value is None:
            if key in required:
                raise CapacityError("%s.%s is required (%s)" % (what, key, keys[key]))
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise CapacityError("%s.%s must be a number >= 0 (%s), got %r"
                                % (what, key, keys[key], value))
        out[key] = float(value)
    for key in required:
        if out[key] <= 0:
            raise CapacityError("%s.%s must be > 0 (%s)" % (what, key, keys[key]))
    return out


def roofline(model, hardware, spec_steps=0, accept_len=None, measured_tok_s=None, drafter_params_b=None):
    """The single-stream decode ceiling and the measured share of it (None when not measured).
    ``spec_steps``: the draft positions per verify (the accept length is at most steps + 1);
    ``drafter_params_b``: a separate drafter's weights, read once per verify cycle in place of the
    MTP layer and LM head per step (DFLASH drafts its whole block in one forward)."""
    m = _figures(model, MODEL_KEYS, "model", ("params_b", "dtype_bytes"))
    h = _figures(hardware, HARDWARE_KEYS, "hardware", ("gpu_count", "gpu_bandwidth_gbs"))
    steps = int(spec_steps or 0)
    per_step_gb = (m.get("mtp_layer_params_b", 0.0) + m.get("lm_head_params_b", 0.0)) * m["dtype_bytes"]
    if steps and not per_step_gb and not drafter_params_b:
        raise CapacityError("model.mtp_layer_params_b and model.lm_head_params_b are needed for the "
                            "speculative roofline (bytes read per draft step)")
    weights_gb = m["params_b"] * m["dtype_bytes"]
    draft_gb = float(drafter_params_b) * m["dtype_bytes"] if drafter_params_b and steps else \
        steps * per_step_gb
    cycle_gb = weights_gb + draft_gb
    bandwidth = h["gpu_count"] * h["gpu_bandwidth_gbs"]
    cycles_per_s = bandwidth / cycle_gb
    note = None
    if not steps:
        al = 1.0
    elif accept_len:
        al = float(accept_len)
    else:
        al = float(steps + 1)
        note = "no measured accept length: ceiling at the maximum, steps + 1 = %d" % (steps + 1)
    ceiling = cycles_per_s * al
    share = None if measured_tok_s is None else 100.0 * float(measured_tok_s) / ceiling
    return {
        "bandwidth_gbs": bandwidth,
        "weights_gb": weights_gb,
        "per_draft_step_gb": per_step_gb if steps and not drafter_params_b else 0.0,
        "drafter_gb": draft_gb if drafter_params_b and steps else 0.0,
        "spec_steps": steps,
        "bytes_per_cycle_gb": cycle_gb,
        "cycles_per_s": cycles_per_s,
        "accept_len": al,
        "ceiling_tok_s": ceiling,
        "measured_tok_s": measured_tok_s,
        "share_pct": share,
        "note": note,
        "formula": "%g GPUs x %g GB/s / %.2f GB per verify cycle x accept length %.2f = %.1f tok/s"
                   % (h["gpu_count"], h["gpu_bandwidth_gbs"], cycle_gb, al, ceiling),
    }


def roofline_line(r):
    """One line for a report: ceiling, share, arithmetic."""
    share = "" if r["share_pct"] is None else "measured %.1f = %.0f%% of it; " % (
        r["measured_tok_s"], r["share_pct"])
    return "%.1f tok/s ceiling; %s%s" % (r["ceiling_tok_s"], share, r["formula"])


def memory_budget(model, hardware, tp_size=None, mem_fraction_static=None, context_length=None,
                  max_running_requests=None, mamba_full_memory_ratio=None, spec_draft_tokens=0,
                  kv_full_context_requests=1, default_mem_fraction=0.88, drafter=None):
    """Per-GPU estimate of what the profile asks SGLang to hold; ``fits`` and ``problems`` say
    whether it can start. All sizes GiB per GPU. ``drafter``: a separate drafter's size
    ({params_b, kv_bytes_per_token}), whose weights stand in for the MTP module's and whose cache
    takes a slot per target token beside the target's (SGLang's draft pool shares the target's
    slot index space: --speculative-draft-kv-cache-dtype's help)."""
    m = _figures(model, MODEL_KEYS, "model", ("params_b", "dtype_bytes", "kv_bytes_per_token"))
    h = _figures(hardware, HARDWARE_KEYS, "hardware", ("gpu_count", "gpu_memory_gib"))
    tp = int(tp_size or h["gpu_count"])
    draft = int(spec_draft_tokens or 0)
    fraction = float(mem_fraction_static) if mem_fraction_static else float(default_mem_fraction)
    ratio = (SGLANG_MAMBA_FULL_MEMORY_RATIO if mamba_full_memory_ratio is None
             else float(mamba_full_memory_ratio))
    context = int(context_length or m.get("context_length_max") or 0)
    if not context:
        raise CapacityError("context_length is not set and model.context_length_max is unknown")
    running = int(max_running_requests or (SGLANG_SPEC_MAX_RUNNING_REQUESTS if draft else 1))

    budget = h["gpu_memory_gib"] * fraction
    weights = m["params_b"] * 1e9 * m["dtype_bytes"] / tp / GIB
    draft_params = (drafter or {}).get("params_b") if drafter else m.get("mtp_params_b", 0.0)
    mtp = draft_params * 1e9 * m["dtype_bytes"] / tp / GIB if draft else 0.0
    rest = budget - weights - mtp
    what = "drafter" if drafter else "MTP"
    state = m.get("mamba_state_bytes_per_request", 0.0) / tp / GIB
    hybrid = state > 0
    mamba_share = rest * ratio / (1 + ratio) if hybrid and rest > 0 else 0.0
    kv_share = max(rest - mamba_share, 0.0)
    per_request_state = state * (1 + draft)  # own state + one intermediate per draft token
    mamba_requests = int(mamba_share // per_request_state) if hybrid else None
    kv_token_bytes = (m["kv_bytes_per_token"] + (drafter or {}).get("kv_bytes_per_token", 0)) / tp
    kv_tokens = int(kv_share * GIB // kv_token_bytes)
    kv_needed = context * int(kv_full_context_requests)
    effective = running if not hybrid else min(running, mamba_requests)

    problems = []
    if rest <= 0:
        problems.append("the weights (%.2f GiB%s) do not fit in %.2f GiB (%g GiB x mem fraction %.2f)"
                        % (weights + mtp, " incl. %.2f GiB %s" % (mtp, what) if mtp else "", budget,
                           h["gpu_memory_gib"], fraction))
    else:
        if hybrid and mamba_requests < 1:
            problems.append("the mamba share (%.2f GiB at mamba_full_memory_ratio %.2f) holds no "
                            "request: one needs %.3f GiB (state + %d intermediate)"
                            % (mamba_share, ratio, per_request_state, draft))
        if kv_tokens < kv_needed:
            problems.append("the KV share (%.2f GiB) holds %d tokens, fewer than context_length %d x "
                            "%d request(s) = %d" % (kv_share, kv_tokens, context,
                                                    int(kv_full_context_requests), kv_needed))
    lines = [
        "budget %.2f GiB = %g GiB x mem fraction %.2f%s" % (
            budget, h["gpu_memory_gib"], fraction, "" if mem_fraction_static else " (assumed)"),
        "weights %.2f GiB = %g B params x %g bytes / tp %d" % (weights, m["params_b"],
                                                              m["dtype_bytes"], tp),
    ]
    if mtp:
        lines.append("%s weights %.2f GiB = %g B params x %g bytes / tp %d"
                     % (what, mtp, draft_params, m["dtype_bytes"], tp))
    lines.append("left for caches %.2f GiB" % rest)
    if hybrid:
        lines.append("mamba share %.2f GiB = left x %.2f / (1 + %.2f): %.3f GiB per request "
                     "(state + %d draft intermediates) -> %d requests%s"
                     % (mamba_share, ratio, ratio, per_request_state, draft, mamba_requests,
                        "" if mamba_requests >= running
                        else " (fewer than max running requests %d)" % running))
    lines.append("KV share %.2f GiB / %d bytes per token%s -> %d tokens = %.2f x context %d"
                 % (kv_share, kv_token_bytes, " (the drafter's cache included)" if drafter else "",
                    kv_tokens, kv_tokens / float(context), context))
    return {
        "tp_size": tp,
        "budget_gib": budget,
        "mem_fraction_static": fraction,
        "weights_gib": weights,
        "mtp_gib": mtp,
        "rest_gib": rest,
        "mamba_share_gib": mamba_share,
        "mamba_gib_per_request": per_request_state,
        "mamba_requests": mamba_requests,
        "kv_share_gib": kv_share,
        "kv_tokens": kv_tokens,
        "kv_tokens_needed": kv_needed,
        "context_length": context,
        "max_running_requests": running,
        "effective_running_requests": effective,
        "fits": not problems,
        "problems": problems,
        "lines": lines,
    }


def profile_memory_budget(profile, model, hardware, full_context_requests=1, default_fraction=0.88):
    """memory_budget() of one entry of sglang_profiles."""
    if not isinstance(profile, dict):
        raise CapacityError("the profile must be a dict, got %r" % (profile,))
    return memory_budget(
        model, hardware,
        tp_size=profile.get("tp_size"),
        mem_fraction_static=profile.get("mem_fraction_static"),
        context_length=profile.get("context_length"),
        max_running_requests=profile.get("max_running_requests"),
        mamba_full_memory_ratio=profile.get("mamba_full_memory_ratio"),
        spec_draft_tokens=profile.get("speculative_num_draft_tokens")
        if profile.get("speculative_algorithm") else 0,
        kv_full_context_requests=full_context_requests,
        default_mem_fraction=default_fraction,
        drafter=profile.get("draft_model") if profile.get("speculative_algorithm") else None)


def reach_errors(cases, profile, profile_name, model, hardware, accept_ceiling=1):
    """The gate plan's resolved cases whose min_tok_s is above the profile's decode roofline at
    its best accept length (``accept_ceiling``, the engine's: profile.accept_ceiling; 1 without
    speculation): no run of them can pass. Each names its variable."""
    if not isinstance(profile, dict):
        raise CapacityError("the profile must be a dict, got %r" % (profile,))
    draft = profile.get("draft_model") if isinstance(profile.get("draft_model"), dict) else {}
    r = roofline(model, hardware, max(0, int(accept_ceiling or 1) - 1),
                 drafter_params_b=draft.get("params_b"))
    errors = []
    for case in cases:
        need = case["thresholds"].get("min_tok_s")
        if need is not None and float(need) > r["ceiling_tok_s"]:
            var = "sglang_gate_calibrated" if case["source"].get("min_tok_s") == "calibrated" \
                else "sglang_gate_thresholds"
            errors.append("%s.%s.%s.min_tok_s (%s) cannot be reached by profile %s: its decode "
                          "roofline is %.1f tok/s (%s; sglang_hardware, sglang_model_size)"
                          % (var, profile_name, case["case"], need, profile_name, r["ceiling_tok_s"],
                             r["formula"]))
    return errors
