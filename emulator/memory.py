"""GPU memory and pool sizing as SGLang 0.5.23 does it for a hybrid (Gated-DeltaNet + attention)
model, per GPU: the default ``mem_fraction_static``, the mamba state pool, the KV pool
(``max_total_num_tokens``), the effective ``max_running_requests`` and ``max_req_input_len``.

Each step names the SGLang function it mirrors (paths under ``sglang/srt/``):

1. ``arg_groups/memory_hook.py handle_gpu_memory_settings`` (+ ``reserve_for_graph_mb``,
   ``adjust_mem_fraction_for_vlm``): chunked_prefill_size, the decode CUDA-graph max_bs and,
   when ``--mem-fraction-static`` is unset, the fraction itself.
2. ``mem_cache/kv_cache_configurator.py KVCacheConfigurator._profile_available_bytes``: free GPU
   memory after the target and draft weights minus ``pre_model_load_memory * (1 -
   mem_fraction_static)`` minus the multimodal reservation (``mm_runtime_reservation_gb``), then
   ``_handle_max_mamba_cache`` takes the mamba state pool (and, with speculation, the
   intermediate verify state for the resolved draft tokens) out of it; the verify state is
   allocated for the largest width (adaptive: max candidate + 1), the rest from free memory.
3. ``model_executor/pool_configurator.py DefaultPoolConfigurator``: what is left divided by the
   per-token KV bytes of the full-attention layers (the EAGLE/MTP draft layer's share added,
   ``eagle_draft_num_layers / num_layers``) gives ``max_total_num_tokens``.
4. ``KVCacheConfigurator.resolve_max_num_reqs``: the effective max_running_requests, capped by
   the KV pool (``// 2``) and by the mamba pool (``max_mamba_cache_size // _calculate_mamba_ratio``).
5. ``managers/tp_worker.py TpModelWorker.get_worker_info``: ``max_req_len = min(context_len - 1,
   kv_capacity - 1)``, ``max_req_input_len = max_req_len - 5``, and the warning when the KV pool
   is smaller than the context.

No GPU is involved: what SGLang measures (free memory before and after loading the weights) comes
from the team's original server log, and the one figure nothing reports (``PRE_POOL_RESERVE_MIB``, memory
held between weight loading and pool sizing) is calibrated; see README.md "Capacity".
"""
from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List

from . import adaptive

logger = logging.getLogger("sglang.srt.model_executor.model_runner")

GIB = 1 << 30  # mem_cache/memory_pool.py GB = 1024 ** 3; SGLang's "GB" in logs is GiB

# RTX A6000 as nvidia-smi reports it (memory.total, MiB); memory_hook.py reads exactly this via
# utils/common.py get_nvgpu_memory_capacity.
A6000_MEMORY_MIB = 49140

# ---- measured on the original host (2x RTX A6000, TP 2), per GPU -----------------------------
# Free memory before the weights: the original log "Load weight begin. avail mem=47.09 GB" (the
# CUDA context, NCCL and the custom all-reduce buffers take the rest of the 47.99 GiB).
CUDA_CONTEXT_GIB = A6000_MEMORY_MIB / 1024.0 - 47.09
# Base weights at TP 2: the original log's "Load weight end. ... mem usage=25.64 GB" (27.78 B params in
# BF16 = 25.87 GiB / 2 GPUs, minus what is not sharded).
WEIGHTS_GIB_TP2 = 25.64
# The MTP (NEXTN) draft layer + its LM-head share at TP 2: the original log's 2.79-2.82 GB, midpoint.
MTP_WEIGHTS_GIB_TP2 = 2.805
TARGET_PARAMS_B = 27.78  # the target's weights (55.56 GB in BF16)
# A separate drafter's cache per target token, all GPUs: SGLang 0.5.23's
# --speculative-draft-kv-cache-dtype help, "a 5-layer DFLASH draft costs 10240 bytes/token in bf16".
DRAFTER_KV_BYTES_PER_TOKEN = 10240


def drafter_weights_gib(params_b: float, tp: int) -> float:
    """A separate drafter's weights per GPU: ``params_b`` billion parameters in BF16, sharded
    over the tensor-parallel GPUs (knobs.py DRAFTER_PARAMS_B). Both engines' sizing use it."""
    return params_b * 1e9 * 2 / max(1, tp) / GIB


def drafter_kv_bytes_per_token(tp: int) -> int:
    """A separate drafter's cache per target token, per GPU (DRAFTER_KV_BYTES_PER_TOKEN over the
    tensor-parallel GPUs)."""
    return DRAFTER_KV_BYTES_PER_TOKEN // max(1, tp)


# ---- Qwen3.6-27B (HF config.json text_config; identical to Qwen3.5-27B) -----------------------
# Used for every key <model-path>/config.json does not carry (the repo's stand-in config.json
# carries only architectures, num_hidden_layers and mtp_num_hidden_layers).
QWEN36_27B = {
    "num_hidden_layers": 64,
    "full_attention_interval": 4,     # layer l is full attention when (l + 1) % 4 == 0: 16 of 64
    "num_attention_heads": 24,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 48,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "mamba_ssm_dtype": "float32",     # configs/mamba_utils.py mamba2_state_dtype default
    "mtp_num_hidden_layers": 1,
    "max_position_embeddings": 262144,
    "vision_hidden_size": 1152,       # vision_config.hidden_size (Qwen3VLVisionConfig default)
}
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
KV_DTYPE_BYTES = 2  # BF16 KV cache (--kv-cache-dtype auto on a BF16 model)
CONV_DTYPE_BYTES = 2  # mamba_utils.py: conv state bfloat16 unless SGLANG_MAMBA_CONV_DTYPE

# ---- SGLang 0.5.23 constants ------------------------------------------------------------------
MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO = 3  # kv_cache_configurator.py
MAMBA_FULL_MEMORY_RATIO_FALLBACK = 0.9            # arg_groups/fields/schedule.py fallback
MAX_PREFILL_TOKENS = 16384                        # arg_groups/fields/schedule.py default
VLM_CACHE_SIZE_MB = 100                           # environ.py SGLANG_VLM_CACHE_SIZE_MB
PAGE_SIZE = 1  # page_size default; model_overrides/qwen3_5.py sets 64 only on sm100 (trtllm_mha)
# memory_hook.py adjust_mem_fraction_for_vlm: ViT-L/14 baseline, 0.95 base factor, 10% per 100%.
VIT_BASELINE_LAYERS, VIT_BASELINE_HIDDEN = 24, 1024
# Multimodal architectures (configs/model_config.py multimodal_model_archs, those we may meet).
MULTIMODAL_ARCHS = {"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"}


class CapacityError(RuntimeError):
    """What SGLang raises when the pools cannot be sized."""


# ------------------------------------------------------------------------------ model --------
def read_model_config(model_path: str) -> Dict[str, Any]:
    """The text config of <model-path>/config.json (top level or ``text_config``), every key it
    lacks from QWEN36_27B."""
    cfg = dict(QWEN36_27B)
    try:
        with open(os.path.join(model_path, "config.json"), encoding="utf-8") as fh:
            raw = json.load(fh)
    except (OSError, ValueError):
        return cfg
    if not isinstance(raw, dict):
        return cfg
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    for key in QWEN36_27B:
        for src in (text, raw):
            if isinstance(src.get(key), (int, float, str)) and not isinstance(src.get(key), bool):
                cfg[key] = src[key]
                break
    vision = raw.get("vision_config")
    if isinstance(vision, dict) and isinstance(vision.get("hidden_size"), int):
        cfg["vision_hidden_size"] = vision["hidden_size"]
    return cfg


def full_attention_layers(mc: Dict[str, Any], hybrid: bool) -> int:
    """configs/qwen3_next.py full_attention_layer_ids (all layers for a non-hybrid model)."""
    n = int(mc["num_hidden_layers"])
    if not hybrid:
        return n
    interval = max(1, int(mc["full_attention_interval"]))
    return sum(1 for layer in range(n) if (layer + 1) % interval == 0)


def kv_heads_per_gpu(mc: Dict[str, Any], tp: int) -> int:
    """configs/model_config.py get_num_kv_heads: max(1, total // tp)."""
    return max(1, int(mc["num_key_value_heads"]) // max(1, tp))


def target_kv_bytes_per_token(mc: Dict[str, Any], tp: int, hybrid: bool) -> int:
    """pool_configurator.py DefaultPoolConfigurator._compute_cell_size (MHA branch):
    kv_heads x (head_dim + v_head_dim) x full-attention layers x dtype bytes, per GPU."""
    hd = int(mc["head_dim"])
    return kv_heads_per_gpu(mc, tp) * (hd + hd) * full_attention_layers(mc, hybrid) * KV_DTYPE_BYTES


def mamba_state_bytes(mc: Dict[str, Any], tp: int) -> Dict[str, int]:
    """configs/qwen3_next.py mamba2_cache_params + mamba_utils.py Mamba2StateShape.create and
    Mamba2CacheParams.mamba_cache_per_req, per GPU (heads and groups sharded by the attention-TP
    size): conv (conv_dim / tp, kernel - 1) in BF16 and the SSM state (v_heads / tp, v_dim, k_dim)
    in mamba_ssm_dtype, for each linear-attention layer."""
    n_layers = int(mc["num_hidden_layers"]) - full_attention_layers(mc, True)
    v_heads, k_heads = int(mc["linear_num_value_heads"]), int(mc["linear_num_key_heads"])
    v_dim, k_dim = int(mc["linear_value_head_dim"]), int(mc["linear_key_head_dim"])
    conv_dim = v_heads * v_dim + 2 * k_heads * k_dim
    conv = conv_dim // tp * (int(mc["linear_conv_kernel_dim"]) - 1) * CONV_DTYPE_BYTES
    ssm = v_heads // tp * v_dim * k_dim * DTYPE_BYTES.get(str(mc["mamba_ssm_dtype"]), 4)
    return {"layers": n_layers, "conv_per_layer": conv, "ssm_per_layer": ssm,
            "per_req": (conv + ssm) * n_layers, "ssm_per_req": ssm * n_layers,
            "conv_dim_per_gpu": conv_dim // tp}


# ------------------------------------------------------------------- resolution (step 1) -----
def gpu_class_defaults(gpu_mem_mib: float, tp: int):
    """memory_hook.py handle_gpu_memory_settings: (chunked_prefill_size, decode max_bs)."""
    if gpu_mem_mib < 20 * 1024:
        return 2048, 8
    if gpu_mem_mib < 35 * 1024:
        return 4096, 48 if tp < 4 else 160
    if gpu_mem_mib < 60 * 1024:
        return 4096, 32 if tp < 4 else 160
    if gpu_mem_mib < 90 * 1024:
        return 8192, 256 if tp < 4 else 512
    if gpu_mem_mib < 160 * 1024:
        return 8192, 256 if tp < 4 else 512
    return 16384, 512


def prefill_graph_batch_sizes(max_bs: int) -> List[int]:
    """arg_groups/cuda_graph_hook.py generate_prefill_cuda_graph_batch_sizes."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1024 + 1, 64)) + list(range(1280, 4096 + 1, 256))
             + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def memory_settings(gpu_mem_mib: float, tp: int, max_running_requests: int | None,
                    mem_fraction_static: float | None, architecture: str,
                    mc: Dict[str, Any]) -> Dict[str, Any]:
    """handle_gpu_memory_settings, before the speculative hook runs (so an unset
    --max-running-requests is still None here, as in SGLang's resolution pipeline)."""
    chunked, decode_max_bs = gpu_class_defaults(gpu_mem_mib, tp)
    if max_running_requests is not None and decode_max_bs > max_running_requests:
        decode_max_bs = max_running_requests
    prefill_bs = prefill_graph_batch_sizes(chunked)  # breakable prefill graph (Qwen3.5 allowlisted)
    out = {"chunked_prefill_size": chunked, "decode_max_bs": decode_max_bs,
           "prefill_graph_sizes": len(prefill_bs), "mem_fraction_static": mem_fraction_static,
           "mem_fraction_static_source": "command line"}
    if mem_fraction_static is None:
        activation_tokens = max(chunked, 2048)
        reserved = 512 + activation_tokens * 1.5 + tp * 1 / 8 * 1024
        # reserve_for_graph_mb: decode graphs max_bs x 2 MB, non-MLA prefill graphs 8 MB each
        reserved += decode_max_bs * 2 + len(prefill_bs) * 8
        if gpu_mem_mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
        fraction = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
        if architecture in MULTIMODAL_ARCHS:
            # adjust_mem_fraction_for_vlm: vision_config has no num_hidden_layers (Qwen3VL's is
            # `depth`), so SGLang's getattr falls back to 24 layers.
            ratio = (VIT_BASELINE_LAYERS * int(mc["vision_hidden_size"]) ** 2
                     / float(VIT_BASELINE_LAYERS * VIT_BASELINE_HIDDEN ** 2))
            dynamic = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
            fraction = fraction * (0.95 * dynamic)
        out.update(mem_fraction_static=fraction, reserved_mb=reserved,
                   mem_fraction_static_source="computed (memory_hook.handle_gpu_memory_settings)")
    return out


# --------------------------------------------------------------------- sizing (steps 2-5) -----
@dataclass
class Capacity:
    gpu_memory_mib: float
    mem_fraction_static: float
    pre_model_load_gib: float
    weights_gib: float
    draft_weights_gib: float
    pre_pool_reserve_gib: float
    avail_after_weights_gib: float
    slack_gib: float
    mm_reservation_gib: float
    rest_before_mamba_gib: float
    mamba_per_req_bytes: int
    mamba_ratio: int
    max_mamba_cache_size: int | None
    mamba_state_gib: float
    mamba_ssm_gib: float
    mamba_conv_gib: float
    intermediate_ssm_gib: float
    intermediate_conv_gib: float
    kv_bytes_per_token: int
    target_kv_bytes_per_token: int
    max_total_num_tokens: int
    kv_cache_gib: float
    max_running_requests: int
    context_len: int
    max_req_len: int
    max_req_input_len: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    decode_max_bs: int
    prefill_graph_sizes: int
    graph_gib: Dict[str, float] = field(default_factory=dict)
    available_gpu_mem_gib: float = 0.0
    warnings: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @property
    def effective_context(self) -> int:
        return min(self.context_len, self.max_total_num_tokens)


def mamba_ratio(args: Dict[str, Any]) -> int:
    """kv_cache_configurator.py _calculate_mamba_ratio: 3 + the extra_buffer tracking slots
    (allocation_sizing.get_mamba_tracking_slots: 2 with the overlap schedule, 1 lazy)."""
    strategy = args.get("mamba_radix_cache_strategy")
    extra = 0
    if strategy == "extra_buffer":
        extra = 1 if args.get("disable_overlap_schedule") else 2
    elif strategy == "extra_buffer_lazy":
        extra = 1
    return MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO + extra


def compute(args: Dict[str, Any], gpu_memory_mib: float = A6000_MEMORY_MIB,
            pre_pool_reserve_mib: float = 0.0, drafter_params_b: float | None = None) -> Capacity:
    """The pools SGLang 0.5.23 sizes for the resolved ``args`` (args.resolve's dict) on a GPU of
    ``gpu_memory_mib``; ``drafter_params_b``: a separate drafter's weights (knobs.py
    DRAFTER_PARAMS_B), needed when ``args`` loads one. Raises CapacityError / ValueError with
    SGLang's messages."""
    tp = max(1, int(args["tp_size"]))
    arch = args["architectures"][0]
    hybrid = bool(args.get("uses_mamba_radix_cache"))
    mc = read_model_config(args["model_path"])
    spec = args.get("speculative_algorithm") is not None
    draft_tokens = int(args.get("speculative_num_draft_tokens") or 0) if spec else 0
    mrr = args.get("max_running_requests")
    settings = args.get("_memory_settings") or memory_settings(
        gpu_memory_mib, tp, mrr, args.get("mem_fraction_static"), arch, mc)
    mf = float(args["mem_fraction_static"])
    context_len = int(args.get("context_length") or mc["max_position_embeddings"])
    warnings: List[str] = []

    # ---- _profile_available_bytes (weights: target, then the draft worker's, both loaded
    # before the pools: managers/scheduler.py builds the draft worker before init_memory_pools)
    pre = gpu_memory_mib / 1024.0 - CUDA_CONTEXT_GIB  # bootstrap.measure_pre_model_load_memory
    weights = WEIGHTS_GIB_TP2 * 2.0 / tp
    drafter = spec and args.get("speculative_draft_model_path") is not None
    if drafter and drafter_params_b is None:
        raise TypeError("memory.compute: a drafter's weights (drafter_params_b) are needed")
    draft = (drafter_weights_gib(drafter_params_b, tp) if drafter else
             MTP_WEIGHTS_GIB_TP2 * 2.0 / tp if spec else 0.0)
    if weights + draft >= pre:
        raise CapacityError("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate the "
                            "weights (%.2f GiB per GPU at tp_size %d) with %.2f GiB free"
                            % (weights + draft, tp, pre))
    reserve = pre_pool_reserve_mib / 1024.0
    available = pre - weights - draft - reserve
    slack = pre * (1.0 - mf)
    mm = VLM_CACHE_SIZE_MB / 1024.0 if arch in MULTIMODAL_ARCHS else 0.0  # mm_runtime_reservation_gb
    rest = available - slack - mm
    rest_before_mamba = rest

    # ---- _handle_max_mamba_cache
    ms = mamba_state_bytes(mc, tp)
    per_req = ms["per_req"]
    ratio = mamba_ratio(args)
    size: int | None = None
    intermediate_ssm = intermediate_conv = beyond_plan = 0.0
    capped_reqs = 0
    if hybrid:
        if args.get("max_mamba_cache_size") is not None:
            size = int(args["max_mamba_cache_size"])
            if spec:
                capped_reqs = min(max(1, int(mrr)), size // ratio)
                rest -= per_req * (capped_reqs + 1) * draft_tokens / GIB
        else:
            r = float(args.get("mamba_full_memory_ratio") or MAMBA_FULL_MEMORY_RATIO_FALLBACK)
            budget = rest * r / (1 + r) * GIB
            if spec:
                # joint solve: main state + intermediate (+1 padding slot each) = budget
                size = int((budget - per_req * (1 + draft_tokens))
                           // (per_req * (1 + draft_tokens / ratio)))
                capped_reqs = min(max(1, int(mrr)), size // ratio)
                rest -= per_req * (capped_reqs + 1) * draft_tokens / GIB
            else:
                size = int((budget - per_req) // per_req)
        if size <= 0:
            raise CapacityError(
                "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
                "Computed max_mamba_cache_size=%d (total_rest_memory=%.2f GB, "
                "mamba_cache_per_req=%.2f MB). Try: (1) reduce --max-running-requests, "
                "(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, "
                "or (4) use GPUs with more memory." % (size, rest, per_req / (1 << 20)))
        rest -= (size + 1) * per_req / GIB
        if spec:
            # the pool (kv_cache_configurator.py _build_hybrid_req_pool) is allocated for the
            # largest draft-token width (adaptive: max candidate + 1), the budget above took D
            width = adaptive.max_draft_tokens(args) or draft_tokens
            intermediate_ssm, intermediate_conv = intermediate_state_gib(
                ms, mc, capped_reqs, width)
            planned_ssm, planned_conv = intermediate_state_gib(ms, mc, capped_reqs, draft_tokens)
            beyond_plan = intermediate_ssm + intermediate_conv - planned_ssm - planned_conv
    if rest <= 0:
        minimum = 1 - available / pre
        raise ValueError(
            "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=%s. "
            "Raise --mem-fraction-static above %.3f (minimum viable = 1 - available/pre = %.4f). "
            "If using speculative decoding, draft weights are now counted."
            % (mf, math.ceil(minimum * 1000) / 1000, minimum))

    # ---- DefaultPoolConfigurator.calculate_pool_sizes
    target_cell = target_kv_bytes_per_token(mc, tp, hybrid)
    cell = target_cell
    if drafter:
        # a drafter's own pool, one slot per target token
        cell += drafter_kv_bytes_per_token(tp)
    elif spec:
        # EAGLE/MTP draft pool shares the target's per-layer KV size
        n_layers = full_attention_layers(mc, hybrid)
        cell += int(target_cell * int(mc["mtp_num_hidden_layers"]) / n_layers)
    max_total = int(rest * GIB) // cell // PAGE_SIZE * PAGE_SIZE
    if max_total <= 0:
        raise CapacityError("Not enough memory. Please try to increase --mem-fraction-static. "
                            "Current value: mem_fraction_static=%s" % mf)

    # ---- resolve_max_num_reqs
    estimated = max(min(int(max_total / context_len * 512), 4096), 2048)
    if mrr is not None:
        requested = max(1, int(mrr))
        max_num_reqs = min(requested, max_total // 2)
    else:
        requested = None
        max_num_reqs = min(estimated, max_total // 2)
    capped_by_mamba = False
    if hybrid:
        cap = size // ratio
        if cap < max_num_reqs:
            capped_by_mamba = True
            warnings.append(
                "max_running_requests is capped to %d by the mamba state cache "
                "(max_mamba_cache_size=%d, %d state slots per request). To raise it: increase "
                "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size "
                "with --mamba-ssm-dtype bfloat16." % (cap, size, ratio))
        max_num_reqs = min(max_num_reqs, cap)
        if max_num_reqs <= 0:
            raise CapacityError(
                "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
                "max_mamba_cache_size=%d, mamba_ratio=%d, resulting max_num_reqs=%d. Try: (1) "
                "reduce --max-running-requests, (2) increase --mem-fraction-static, or (3) use "
                "GPUs with more memory." % (size, ratio, max_num_reqs))
    if requested is not None and max_num_reqs < requested and not capped_by_mamba:
        warnings.append("max_running_requests was reduced from the requested %d to %d (per dp "
                        "worker) due to the available KV cache capacity." % (requested, max_num_reqs))

    # ---- TpModelWorker.get_worker_info
    if max_total < context_len:
        warnings.append(
            "KV pool holds %d tokens, fewer than --context-length %d. One full-length request "
            "cannot fit, so long requests will be refused or truncated at serving time. Lower "
            "--context-length, raise --mem-fraction-static, or free memory taken before the pool "
            "is sized." % (max_total, context_len))
    max_req_len = min(context_len - 1, max_total - 1)

    # graphs and what is free once they are captured (scheduler.py "available_gpu_mem"): SGLang's
    # own estimate of the graph memory (reserve_for_graph_mb), taken from the non-static slack
    decode_bs = settings["decode_max_bs"]
    graphs = {"prefill": settings["prefill_graph_sizes"] * 8 / 1024.0,
              "decode": 0.0 if spec else decode_bs * 2 / 1024.0,
              "target_verify": decode_bs * 2 / 1024.0 if spec else 0.0,
              "draft_prefill": 0.0, "draft_decode": 0.0, "draft_extend": 0.0}
    # the verify state allocated beyond the width the budget planned comes out of what is free
    free_after = slack + mm - sum(graphs.values()) - beyond_plan
    ssm_gib = (size + 1) * ms["ssm_per_req"] / GIB if size is not None else 0.0
    conv_gib = (size + 1) * (per_req - ms["ssm_per_req"]) / GIB if size is not None else 0.0
    return Capacity(
        gpu_memory_mib=gpu_memory_mib, mem_fraction_static=mf, pre_model_load_gib=pre,
        weights_gib=weights, draft_weights_gib=draft, pre_pool_reserve_gib=reserve,
        avail_after_weights_gib=pre - weights, slack_gib=slack, mm_reservation_gib=mm,
        rest_before_mamba_gib=rest_before_mamba, mamba_per_req_bytes=per_req if hybrid else 0,
        mamba_ratio=ratio if hybrid else 0, max_mamba_cache_size=size,
        mamba_state_gib=ssm_gib + conv_gib, mamba_ssm_gib=ssm_gib, mamba_conv_gib=conv_gib,
        intermediate_ssm_gib=intermediate_ssm, intermediate_conv_gib=intermediate_conv,
        kv_bytes_per_token=cell, target_kv_bytes_per_token=target_cell,
        max_total_num_tokens=max_total, kv_cache_gib=(max_total + PAGE_SIZE) * target_cell / GIB,
        max_running_requests=max_num_reqs, context_len=context_len, max_req_len=max_req_len,
        max_req_input_len=max_req_len - 5, chunked_prefill_size=settings["chunked_prefill_size"],
        max_prefill_tokens=MAX_PREFILL_TOKENS, decode_max_bs=decode_bs,
        prefill_graph_sizes=settings["prefill_graph_sizes"], graph_gib=graphs,
        available_gpu_mem_gib=free_after, warnings=warnings)


def intermediate_state_gib(ms: Dict[str, Any], mc: Dict[str, Any], capped_reqs: int,
                           width: int) -> tuple:
    """memory_pool.py MambaPool's verify state for ``width`` draft tokens (GiB per GPU): the SSM
    state per draft token, and the deduplicated conv window of (width + kernel - 2) columns, for
    each of capped_reqs + 1 slots."""
    ssm = ms["ssm_per_req"] * (capped_reqs + 1) * width / GIB
    cols = width + int(mc["linear_conv_kernel_dim"]) - 2
    conv = ms["layers"] * (capped_reqs + 1) * ms["conv_dim_per_gpu"] * cols * CONV_DTYPE_BYTES / GIB
    return ssm, conv


def attention_bytes_per_context_token(args: Dict[str, Any], steps: int | None = None) -> int:
    """Bytes of KV one forward reads per context token, per GPU: the target's full-attention
    layers, plus the MTP layer once per draft step and once for the draft extend after verify;
    ``steps``: an adaptive server's current steps (else the resolved ones)."""
    tp = max(1, int(args["tp_size"]))
    hybrid = bool(args.get("uses_mamba_radix_cache"))
    mc = read_model_config(args["model_path"])
    target = target_kv_bytes_per_token(mc, tp, hybrid)
    if args.get("speculative_algorithm") is None:
        return target
    per_layer = target // max(1, full_attention_layers(mc, hybrid))
    if steps is None:
        steps = int(args.get("speculative_num_steps") or 0)
    return target + per_layer * int(mc["mtp_num_hidden_layers"]) * (steps + 1)
