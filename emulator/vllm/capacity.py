"""KV cache sizing as vLLM 0.33.0 does it for Qwen3.6-27B (hybrid GDN + attention), per GPU.

Steps (paths under vllm/):

1. ``v1/worker/utils.py request_memory``: requested = ceil(total x gpu_memory_utilization);
   less free memory than that at start-up raises "Free memory on device ...".
2. ``v1/worker/gpu_worker.py determine_available_memory``: available KV memory = requested -
   non_kv_cache_memory (weights + the profile run's activation peak + non-torch memory) - the
   CUDA-graph estimate (``profile_cudagraph_memory``, applied by default since 0.21).
3. ``platforms/interface.py _align_hybrid_block_size``: the attention block size is the smallest
   multiple of the kernel block (16) whose page (block x per-token page of one layer) holds one
   mamba state; the mamba page is padded to it. The GDN state per sequence and layer
   (``model_executor/models/qwen3_5.py get_mamba_state_shape_from_config`` ->
   ``mamba_utils.py gated_delta_net_state_shape``): conv (kernel - 1 + num_spec) x conv_dim / tp
   in the model dtype, SSM (v_heads / tp, v_dim, k_dim) in ``mamba_ssm_dtype`` (float32 from
   the HF config, ``Qwen3_5ForConditionalGenerationConfig``).
4. ``v1/core/kv_cache_planning.py _get_kv_cache_groups_uniform_page_size``: 16 attention
   layers (+1 for the MTP draft's attention layer) and 48 GDN layers become groups of
   group_size layers (min count, or max if max < 1.5 x min), padded; one block pool shared by
   all groups, a block costs group_size pages: num_gpu_blocks = available // (group_size x page).
5. ``v1/core/kv_cache_utils.py get_max_concurrency_for_kv_cache_config`` / ``get_kv_cache_capacity``:
   a request at max_model_len takes cdiv(max_model_len, block) attention blocks plus, per mamba
   group, ``MambaSpec.max_memory_usage_bytes`` / page = 2 + num_spec blocks ("align", prefix
   caching on) or 1 + num_spec ("none"); concurrency = num_blocks / that, "GPU KV cache size"
   = int(concurrency x max_model_len) tokens.
6. ``v1/core/kv_cache_planning.py check_enough_kv_cache_memory``: one max_model_len request
   must fit, else "To serve at least one request with the model's max seq len ...".

The mamba state per sequence is therefore not a separate pool as in SGLang: each running request
holds its (2 + k) state pages per mamba group out of the same blocks as the attention KV.

A drafter (dflash, eagle3: the speculative config's ``model``) replaces the MTP layer. Its weights
and cache are the SGLang emulator's figures (``memory.drafter_weights_gib``: DRAFTER_PARAMS_B in
BF16 over the TP GPUs; ``memory.drafter_kv_bytes_per_token``: 10,240 bytes per token over the
TP GPUs), laid out in vLLM's pool as attention layers of the target's page
(``unify_kv_cache_spec_page_size`` scales or pads a draft layer's page to the common one): as
many layer pages per token as its bytes need, rounded up (10,240 / 2 = 5,120 bytes at TP 2 = 2.5
pages of 2,048 -> 3). The layer shapes of the drafter are not read (an assumption). DFlash's
draft pass also caps the running requests (``VllmConfig``: max_num_batched_tokens // (k + 1)).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List

from .. import memory

GIB = 1 << 30
MIB = 1 << 20
KERNEL_BLOCK = 16  # CacheConfig.DEFAULT_BLOCK_SIZE; FlashAttention's MultipleOf(16) on sm_86
# Weights per GPU at TP 2. The target: the original SGLang log (memory.WEIGHTS_GIB_TP2, 25.64 GiB)
# less the vision encoder, which --language-model-only does not load. Vision tower estimate
# (assumption, no log): 27 blocks x 1152 wide (MLP 4304) + the 4608 -> 5120 merger, ~0.455 B
# params in BF16, sharded over TP 2 = 0.42 GiB.
VISION_WEIGHTS_GIB_TP2 = 0.42
# The MTP draft: vLLM shares embed_tokens and lm_head with the target (v1/spec_decode/
# llm_base_proposer.py _maybe_share_embeddings / _maybe_share_lm_head), so only the MTP layer
# loads: SGLang's 2.805 GiB draft (memory.MTP_WEIGHTS_GIB_TP2) less its own embedding and LM head
# (248320 x 5120 x 2 B / 2 GPUs = 1.184 GiB each).
EMBED_GIB_TP2 = 248320 * 5120 * 2 / 2 / GIB
MTP_LAYER_GIB_TP2 = memory.MTP_WEIGHTS_GIB_TP2 - 2 * EMBED_GIB_TP2


class CapacityError(ValueError):
    """What vLLM raises when the KV cache cannot be sized."""


@dataclass
class VllmCapacity:
    total_memory_gib: float
    init_free_memory_gib: float
    gpu_memory_utilization: float
    requested_memory_gib: float
    weights_gib: float
    draft_weights_gib: float
    activation_peak_gib: float
    non_torch_gib: float
    non_kv_cache_memory_gib: float
    cudagraph_memory_gib: float
    available_kv_cache_memory_gib: float
    attn_page_bytes_per_token: int
    mamba_state_bytes: int
    block_size: int
    mamba_page_padding_pct: float
    attention_layers: int
    mamba_layers: int
    group_size: int
    num_groups: int
    padding_layers: int
    num_gpu_blocks: int
    blocks_per_max_len_request: int
    mamba_blocks_per_request: int
    max_concurrency: float
    kv_cache_size_tokens: int
    max_model_len: int
    max_num_seqs: int
    mamba_cache_mode: str
    num_speculative_tokens: int
    drafter_layer_pages: int = 0
    max_num_active_seqs: int | None = None
    warnings: List[str] = field(default_factory=list)

    # ---- the names the shared scheduler reads (memory.Capacity's) -------------------------
    @property
    def max_total_num_tokens(self) -> int:
        return self.kv_cache_size_tokens

    @property
    def max_running_requests(self) -> int:
        # SchedulerConfig.max_num_active_seqs (set by dflash's draft pass) caps max_num_seqs
        return min(self.max_num_seqs, self.max_num_active_seqs or self.max_num_seqs)

    @property
    def max_req_len(self) -> int:
        # get_max_tokens: max_tokens <= max_model_len - input (cap_max_new_tokens subtracts 1)
        return self.max_model_len + 1

    @property
    def max_req_input_len(self) -> int:
        # the scheduler never refuses: the front end does (renderers/params.py)
        return self.max_model_len + 1

    max_mamba_cache_size = None
    mamba_ratio = 0

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


def attn_page_bytes_per_token(mc: Dict[str, Any], tp: int) -> int:
    """FullAttentionSpec(block_size=1).page_size_bytes: K and V, kv heads / tp x head size, BF16."""
    return 2 * memory.kv_heads_per_gpu(mc, tp) * int(mc["head_dim"]) * memory.KV_DTYPE_BYTES


def mamba_state_bytes(mc: Dict[str, Any], tp: int, num_spec: int) -> int:
    """MambaSpec(shapes=gated_delta_net_state_shape(...)).page_size_bytes, one GDN layer."""
    k_heads, v_heads = int(mc["linear_num_key_heads"]), int(mc["linear_num_value_heads"])
    k_dim, v_dim = int(mc["linear_key_head_dim"]), int(mc["linear_value_head_dim"])
    conv_dim = k_dim * k_heads * 2 + v_dim * v_heads
    conv = conv_dim // tp * (int(mc["linear_conv_kernel_dim"]) - 1 + num_spec) * 2  # BF16
    ssm = v_heads // tp * v_dim * k_dim * memory.DTYPE_BYTES.get(str(mc["mamba_ssm_dtype"]), 4)
    return conv + ssm


def group_layers(counts: List[int]) -> tuple:
    """_get_kv_cache_groups_uniform_page_size: (group_size, number of groups, padding layers)."""
    lo, hi = min(counts), max(counts)
    size = hi if hi < lo * 1.5 else lo
    groups = sum(math.ceil(c / size) for c in counts)
    padding = sum((size - c % size) % size for c in counts)
    return size, groups, padding


def drafter_layer_pages(tp: int, per_token: int) -> int:
    """The attention-layer pages a drafter's cache takes per token (module docstring)."""
    return math.ceil(memory.drafter_kv_bytes_per_token(tp) / per_token)


def compute(cfg: Dict[str, Any], gpu_memory_mib: float, activation_peak_mib: float,
            non_torch_mib: float, cudagraph_mib: float,
            drafter_params_b: float | None = None) -> VllmCapacity:
    """The KV cache vLLM 0.33 sizes for the resolved ``cfg`` (args.resolve's dict);
    ``drafter_params_b``: a drafter's weights (knobs.py DRAFTER_PARAMS_B), needed when the
    speculative config loads one. Raises CapacityError with vLLM's messages."""
    tp = max(1, int(cfg["tp_size"]))
    mc = memory.read_model_config(cfg["model_path"])
    # vLLM's num_speculative_tokens (args.resolve; an MTP config without it: its steps)
    k = int(cfg.get("num_speculative_tokens", cfg.get("speculative_num_steps")) or 0)
    drafter = bool(k) and cfg.get("speculative_draft_model_path") is not None
    if drafter and drafter_params_b is None:
        raise TypeError("capacity.compute: a drafter's weights (drafter_params_b) are needed")
    util = float(cfg["gpu_memory_utilization"])
    total = gpu_memory_mib * MIB
    free = total - memory.CUDA_CONTEXT_GIB * GIB
    requested = math.ceil(total * util)
    if free < requested:
        raise CapacityError(
            f"Free memory on device cuda:0 ({free / GIB:.2f}/{total / GIB:.2f} GiB) on startup "
            f"is less than desired GPU memory utilization ({util}, {requested / GIB:.2f} GiB). "
            "Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    weights = memory.WEIGHTS_GIB_TP2 * 2.0 / tp
    if cfg.get("language_model_only"):
        weights -= VISION_WEIGHTS_GIB_TP2 * 2.0 / tp
    draft = (memory.drafter_weights_gib(drafter_params_b, tp) if drafter
             else MTP_LAYER_GIB_TP2 * 2.0 / tp if k else 0.0)
    act, non_torch, graphs = activation_peak_mib / 1024.0, non_torch_mib / 1024.0, cudagraph_mib / 1024.0
    non_kv = weights + draft + act + non_torch
    available = requested / GIB - non_kv - graphs
    if available <= 0:
        raise CapacityError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine (this flag also controls CPU memory reservation on the "
            "CPU backend, despite its name). See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")

    hybrid = bool(cfg.get("hybrid"))
    per_token = attn_page_bytes_per_token(mc, tp)
    # the draft's attention layers: the MTP layer, or a drafter's cache in target-sized pages
    draft_layers = (drafter_layer_pages(tp, per_token) if drafter
                    else int(mc["mtp_num_hidden_layers"]) if k else 0)
    attn_layers = memory.full_attention_layers(mc, hybrid) + draft_layers
    mamba_layers = int(mc["num_hidden_layers"]) - memory.full_attention_layers(mc, True) \
        if hybrid else 0
    state = mamba_state_bytes(mc, tp, k) if hybrid else 0
    block = KERNEL_BLOCK
    if state:
        block = KERNEL_BLOCK * math.ceil(state / (KERNEL_BLOCK * per_token))
    page = block * per_token
    counts = [attn_layers] + ([mamba_layers] if mamba_layers else [])
    size, groups, padding = group_layers(counts)
    warnings: List[str] = []
    if padding:
        warnings.append("Add %d padding layers, may waste at most %.2f%% KV cache memory"
                        % (padding, padding / mamba_layers * 100))
    num_blocks = int(available * GIB) // (size * page)
    mode = cfg.get("resolved_mamba_cache_mode", "none")
    mamba_groups = groups - math.ceil(attn_layers / size)
    per_state = (2 + k) if mode == "align" else (1 + k)
    mml = int(cfg["max_model_len"])
    per_request = math.ceil(mml / block) + mamba_groups * per_state
    needed = attn_layers * math.ceil(mml / block) * page + mamba_layers * per_state * page
    if needed > available * GIB - size * page:  # the null block is held back
        usable = int(available * GIB) - size * page
        est = max(0, (usable // (size * page) - mamba_groups * per_state) * block)
        est_msg = (f"Based on the available memory, the estimated maximum model length is {est}. "
                   if est > 0 else "")
        raise CapacityError(
            f"To serve at least one request with the model's max seq len ({mml}), "
            f"({needed / GIB:.2f} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({available:.2f} GiB). {est_msg}Try increasing "
            "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
            "decreasing `max_model_len` when initializing the engine. See "
            "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    concurrency = num_blocks / per_request
    return VllmCapacity(
        total_memory_gib=total / GIB, init_free_memory_gib=free / GIB, gpu_memory_utilization=util,
        requested_memory_gib=requested / GIB, weights_gib=weights, draft_weights_gib=draft,
        activation_peak_gib=act, non_torch_gib=non_torch, non_kv_cache_memory_gib=non_kv,
        cudagraph_memory_gib=graphs, available_kv_cache_memory_gib=available,
        attn_page_bytes_per_token=per_token, mamba_state_bytes=state, block_size=block,
        mamba_page_padding_pct=(100.0 * (page - state) / state) if state else 0.0,
        attention_layers=attn_layers, mamba_layers=mamba_layers, group_size=size,
        num_groups=groups, padding_layers=padding, num_gpu_blocks=num_blocks,
        blocks_per_max_len_request=per_request, mamba_blocks_per_request=mamba_groups * per_state,
        max_concurrency=concurrency, kv_cache_size_tokens=int(concurrency * mml),
        max_model_len=mml, max_num_seqs=int(cfg["max_num_seqs"]), mamba_cache_mode=mode,
        num_speculative_tokens=k, drafter_layer_pages=draft_layers if drafter else 0,
        max_num_active_seqs=cfg.get("max_num_active_seqs"), warnings=warnings)
