"""The bad-input matrix: what a careless operator really types, with the words the refusal must
contain (the variable and what would be valid). tests/test_deploy_plan.py holds every case against
the deploy plan (plugins/action/sglang_deploy_plan.py, milliseconds each); tests/test_deploy_bad_inputs.py
runs one case of each class through the real preflight on the local container."""
from __future__ import annotations

from conftest import ROOT

P3 = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
      "speculative_num_draft_tokens": 4, "tp_size": 2, "mamba_cache_strategy": "extra_buffer",
      "context_length": 131072}
# a drafter as a profile names it (tests/test_drafters.py)
DRAFT = {"repo": "z-lab/Qwen3.6-27B-DFlash", "revision": "main", "params_b": 1.73,
         "kv_bytes_per_token": 10240}


def profile(**changes):
    p = dict(P3)
    for k, v in changes.items():
        if v is None:
            p.pop(k)
        else:
            p[k] = v
    return {"sglang_profiles": {"mine": p}, "sglang_profile": "mine",
            "sglang_gate_thresholds": {"mine": {"coding": {"min_tok_s": 45, "min_accept_len": 2.8}}}}


# (case id, extra vars, words the message must contain: the variable and what is valid)
CASES = [
    ("unknown profile name", {"sglang_profile": "nextn_9step"},
     ["sglang_profile: 'nextn_9step' is not defined in sglang_profiles",
      "(defined: dflash, nextn_1step, nextn_2step, nextn_3step, nextn_4step, nextn_5step, no_spec, "
      "vllm_dflash, vllm_mtp_1,"]),
    ("original launch: draft tokens without steps",
     profile(speculative_num_steps=None, speculative_eagle_topk=None),
     ["speculative_algorithm NEXTN needs sglang_profiles.mine.speculative_num_steps",
      "sglang_profiles.mine.speculative_eagle_topk too"]),
    ("original launch: the old mamba flag as a setting",
     dict(profile(mamba_cache_strategy=None), **{"sglang_profiles": {"mine": dict(
         P3, mamba_scheduler_strategy="extra_buffer")}}),
     ["sglang_profiles.mine.mamba_scheduler_strategy: unknown setting", "mamba_cache_strategy"]),
    ("mamba strategy typo", profile(mamba_cache_strategy="extra-buffer"),
     ["sglang_profiles.mine.mamba_cache_strategy must be one of auto, no_buffer, extra_buffer"]),
    ("steps without topk", profile(speculative_eagle_topk=None),
     ["needs sglang_profiles.mine.speculative_eagle_topk"]),
    ("draft tokens != steps + 1", profile(speculative_num_draft_tokens=8),
     ["sglang_profiles.mine.speculative_num_draft_tokens must be speculative_num_steps + 1 = 4"]),
    ("unknown algorithm", profile(speculative_algorithm="MTP"),
     ["sglang_profiles.mine.speculative_algorithm must be one of NEXTN"]),
    ("DFLASH with NEXTN's steps", profile(speculative_algorithm="DFLASH", speculative_num_draft_tokens=16,
                                          draft_model=DRAFT),
     ["sglang_profiles.mine.speculative_num_steps must be 1 (or unset) with DFLASH, got 3 (SGLang "
      "overrides it to 1 with a warning)"]),
    ("DFLASH without a drafter", profile(speculative_algorithm="DFLASH", speculative_num_steps=None,
                                         speculative_eagle_topk=None, speculative_num_draft_tokens=16),
     ["speculative_algorithm DFLASH needs sglang_profiles.mine.draft_model {repo, revision, params_b, "
      "kv_bytes_per_token}"]),
    ("DFLASH without its block size", profile(speculative_algorithm="DFLASH", speculative_num_steps=None,
                                              speculative_eagle_topk=None, speculative_num_draft_tokens=None,
                                              draft_model=DRAFT),
     ["DFLASH needs sglang_profiles.mine.speculative_num_draft_tokens, the block size"]),
    ("adaptive speculation with DFLASH", profile(speculative_algorithm="DFLASH", speculative_num_steps=None,
                                                 speculative_eagle_topk=None, speculative_num_draft_tokens=16,
                                                 draft_model=DRAFT,
                                                 speculative_adaptive=True),
     ["sglang_profiles.mine.speculative_adaptive needs speculative_algorithm NEXTN or EAGLE or EAGLE3, "
      "got DFLASH (SGLang switches adaptive speculation off with a warning)"]),
    ("adaptive speculation with tree drafts", profile(speculative_eagle_topk=4, speculative_adaptive=True),
     ["sglang_profiles.mine.speculative_adaptive needs speculative_eagle_topk 1, got 4"]),
    ("drafter as a relative path", profile(speculative_algorithm="EAGLE3",
                                           draft_model=dict(DRAFT, path="models/eagle3")),
     ["sglang_profiles.mine.draft_model.path must be an absolute directory on the host"]),
    ("drafter path set by hand", profile(speculative_algorithm="EAGLE3",
                                         speculative_draft_model_path="/srv/models/eagle3"),
     ["sglang_profiles.mine.speculative_draft_model_path is derived from draft_model"]),
    ("drafter without its size", profile(speculative_algorithm="EAGLE3",
                                         draft_model={"repo": "z-lab/Qwen3.6-27B-DFlash"}),
     ["sglang_profiles.mine.draft_model.params_b must be its weights in billions of parameters"]),
    ("a thinking case on the completions API", {"sglang_gate_api": "completions", "sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 6, "max_tokens": 96},
        "thinking": {"prompts": "coding", "thinking": True, "concurrency": 1, "requests": 6,
                     "max_tokens": 96, "report_only": True}}},
     ["sglang_gate_plan.thinking.thinking needs sglang_gate_api: chat (the completions API sends the "
      "prompt without the chat template"]),
    ("DFLASH with pipeline parallelism", profile(speculative_algorithm="DFLASH", speculative_num_steps=None,
                                                 speculative_eagle_topk=None, speculative_num_draft_tokens=16,
                                                 draft_model=DRAFT, pp_size=2),
     ["sglang_profiles.mine.pp_size must be 1 with DFLASH, got 2"]),
    ("DFLASH with a window smaller than its block",
     profile(speculative_algorithm="DFLASH", speculative_num_steps=None, speculative_eagle_topk=None,
             speculative_num_draft_tokens=16, draft_model=DRAFT, speculative_draft_window_size=8),
     ["sglang_profiles.mine.speculative_draft_window_size (8) must hold a whole block"]),
    ("a Hopper draft attention backend on Ampere",
     profile(speculative_algorithm="DFLASH", speculative_num_steps=None, speculative_eagle_topk=None,
             speculative_num_draft_tokens=16, draft_model=DRAFT, speculative_draft_attention_backend="fa4"),
     ["sglang_profiles.mine.speculative_draft_attention_backend fa4 runs on SM 9.0 and later; the host's "
      "GPUs are SM 8.6 (sglang_hardware.compute_capability)"]),
    ("adaptive speculation on vLLM", {"sglang_profiles": {"mine": {
        "engine": "vllm", "speculative_algorithm": "MTP", "speculative_num_steps": 3, "tp_size": 2,
        "speculative_adaptive": True}}, "sglang_profile": "mine"},
     ["sglang_profiles.mine.speculative_adaptive has no counterpart in vLLM: vLLM 0.33 adapts no draft "
      "length to acceptance"]),
    ("vLLM DFlash without a drafter", {"sglang_profiles": {"mine": {
        "engine": "vllm", "speculative_algorithm": "DFLASH", "speculative_num_steps": 15, "tp_size": 2}},
        "sglang_profile": "mine"},
     ["speculative_algorithm DFLASH needs sglang_profiles.mine.draft_model {repo, revision, params_b, "
      "kv_bytes_per_token} (vLLM's --speculative-config \"model\""]),
    ("tp larger than the GPUs", profile(tp_size=4),
     ["sglang_profiles.mine.tp_size (4) exceeds the GPUs the host is expected to have "
      "(sglang_hardware.gpu_count = 2)"]),
    ("memory fraction as percent", profile(mem_fraction_static=88),
     ["sglang_profiles.mine.mem_fraction_static must be a fraction strictly between 0 and 1"]),
    ("context length as text", profile(context_length="128k"),
     ["sglang_profiles.mine.context_length must be a positive integer number of tokens"]),
    ("max running requests 0", profile(max_running_requests=0),
     ["sglang_profiles.mine.max_running_requests must be an integer >= 1"]),
    ("profile that does not fit in GPU memory", profile(mem_fraction_static=0.5),
     ["profile mine does not fit in GPU memory: the weights (28.64 GiB incl. 2.76 GiB MTP) do "
      "not fit in 24.00 GiB (48 GiB x mem fraction 0.50)"]),
    ("the original hand launch: context the KV cache cannot hold", profile(context_length=None),
     ["fewer than context_length 262144 x 1 request(s) = 262144",
      "budget 42.24 GiB = 48 GiB x mem fraction 0.88 (assumed)"]),
    ("accept length above draft tokens",
     dict(profile(), sglang_gate_thresholds={"mine": {"coding": {"min_tok_s": 45, "min_accept_len": 4.5}}}),
     ["sglang_gate_thresholds.mine (the highest min_accept_len of its cases) (4.5) cannot be met by "
      "profile mine", "at most 4"]),
    ("no thresholds for the profile", {"sglang_profile": "no_spec", "sglang_gate_thresholds": {
        "nextn_3step": {"coding": {"min_tok_s": 45}}}},
     ["sglang_gate_thresholds has no entry for profile no_spec (sglang_profile)"]),
    ("thresholds in the one-case form", {"sglang_gate_thresholds": {"nextn_3step": {"min_tok_s": 45}}},
     ["sglang_gate_thresholds.nextn_3step = {'min_tok_s': 45} has the one-case form",
      "thresholds are per case of the plan now"]),
    ("negative threshold", {"sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_tok_s": -45}}}},
     ["sglang_gate_thresholds.nextn_3step.coding.min_tok_s must be a number >= 0, got -45"]),
    ("threshold name typo", {"sglang_gate_thresholds": {"nextn_3step": {"coding": {"min_toks": 45}}}},
     ["sglang_gate_thresholds.nextn_3step.coding has unknown threshold(s) min_toks",
      "(known: min_tok_s, min_accept_len"]),
    ("a case without thresholds for the profile", {"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 3, "max_tokens": 192},
        "long": {"prompts": "long_context", "prompt_tokens": 32768, "concurrency": 1, "requests": 1,
                 "max_tokens": 64}}},
     ["sglang_gate_thresholds.nextn_3step has no entry for case long of sglang_gate_plan",
      "give {} to measure it without thresholds"]),
    ("port out of range", {"sglang_port": 70000},
     ["sglang_port = 70000 is not valid: a TCP port from 1 to 65535"]),
    ("port as text", {"sglang_port": "http"}, ["sglang_port", "int"]),
    ("relative model path", {"sglang_model_path": "models/Qwen3.6-27B"},
     ["sglang_model_path = models/Qwen3.6-27B is not valid: an absolute path"]),
    ("version 'latest'", {"sglang_version": "latest"},
     ["sglang_version = latest is not valid: an SGLang release such as 0.5.23"]),
    # the emulator wheel the local inventory names follows the version: keep 0.5.23's
    ("version with unknown CUDA runtime",
     {"sglang_version": "0.5.99",
      "sglang_pip_local_files": [str(ROOT / "dist" / "sglang_emulator-0.5.23-py3-none-any.whl")]},
     ["sglang 0.5.99: its CUDA runtime is unknown (engines/sglang.py cuda_runtime lists 0.5.23)"]),
    ("driver too old for the CUDA runtime", {"nvidia_gpu_driver_branch": "570"},
     ["needs NVIDIA driver >= 580.65.06; nvidia_gpu_driver_branch is 570"]),
    ("API key too short", {"sglang_api_key": "abc"},
     ["sglang_api_key = (hidden) is not valid: empty, or at least 16 characters"]),
    ("API key with white space", {"sglang_api_key": "my secret key for the team"},
     ["sglang_api_key = (hidden) is not valid: empty, or at least 16 characters without white space"]),
    ("LAN bind without a key, networks or opt-in", {"sglang_host": "0.0.0.0"},
     ["ct-local: sglang_host = 0.0.0.0 binds beyond loopback (127.0.0.0/8, ::1, localhost) with no API key",
      "set sglang_api_key", "or sglang_allowed_networks", "or sglang_allow_open_network: true"]),
    ("IPv6 wildcard bind without a key", {"sglang_host": "::"},
     ["sglang_host = :: binds beyond loopback"]),
    ("open-network opt-in that is not a boolean",
     {"sglang_host": "0.0.0.0", "sglang_allow_open_network": "maybe"},
     ["sglang_allow_open_network", "bool"]),
    ("reasoning parser typo", profile(reasoning_parser="qwen-3"),
     ["sglang_profiles.mine.reasoning_parser must be one of auto,", "(SGLang 0.5.23), got 'qwen-3'; did you "
      "mean qwen3?"]),
    ("tool-call parser typo", profile(tool_call_parser="qwen3-coder"),
     ["sglang_profiles.mine.tool_call_parser must be one of auto,", "got 'qwen3-coder'; did you mean "
      "qwen3_coder?"]),
    ("served model name with a colon (SGLang's start-up check)", {"sglang_served_model_name": "qwen3.6:27b"},
     ["sglang_served_model_name = qwen3.6:27b is not valid: a non-empty name without white space or ':'"]),
    ("listen address with a port", {"sglang_host": "127.0.0.1:30000"},
     ["sglang_host = 127.0.0.1:30000 is not valid: an IP address or host name to bind, without a port",
      "it carries a port (30000): give the address alone, the port in sglang_port"]),
    ("decode threshold above the roofline", {"sglang_gate_thresholds": {"nextn_3step": {"coding": {
        "min_tok_s": 120}}}},
     ["sglang_gate_thresholds.nextn_3step.coding.min_tok_s (120) cannot be reached by profile nextn_3step: "
      "its decode roofline is 93.5 tok/s"]),
    ("gate history on a kernel file system", {"sglang_gate_history_path": "/sys/gate-history.jsonl"},
     ["ct-local: sglang_gate_history_path = /sys/gate-history.jsonl: /sys is a kernel file system"]),
    ("gate history path is a directory", {"sglang_gate_history_path": "/var/lib"},
     ["sglang_gate_history_path = /var/lib: a directory, not a file"]),
    ("gate history in a directory nobody creates", {"sglang_gate_history_path": "/srv/gate/history.jsonl"},
     ["sglang_gate_history_path = /srv/gate/history.jsonl: its directory /srv/gate does not exist"]),
    ("HF token not a token", {"sglang_hf_token": "my token"},
     ["sglang_hf_token = (hidden) is not valid: empty, or a Hugging Face token (hf_...)"]),
    ("no GPUs expected", {"nvidia_gpu_expected_count": 0},
     ["nvidia_gpu_expected_count = 0 is not valid: the number of GPUs the host has (>= 1)"]),
    ("GPU memory in GB", {"nvidia_gpu_expected_memory_mib": 48},
     ["nvidia_gpu_expected_memory_mib = 48 is not valid: MiB per GPU"]),
    ("zero measured requests", {"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 0, "max_tokens": 192}}},
     ["sglang_gate_plan.coding.requests must be an integer >= 1, got 0"]),
    ("negative concurrency", {"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": -4, "requests": 3, "max_tokens": 192}}},
     ["sglang_gate_plan.coding.concurrency must be an integer >= 1, got -4"]),
    ("one-token benchmark", {"sglang_gate_plan": {
        "coding": {"prompts": "coding", "concurrency": 1, "requests": 3, "max_tokens": 1}}},
     ["sglang_gate_plan.coding.max_tokens must be an integer >= 2, got 1"]),
    ("long context without its length", {"sglang_gate_plan": {
        "coding": {"prompts": "long_context", "concurrency": 1, "requests": 1, "max_tokens": 64}}},
     ["sglang_gate_plan.coding.prompt_tokens must be an integer >= 1024, got None"]),
    ("benchmark API typo", {"sglang_gate_api": "openai"},
     ["sglang_gate_api", "chat, completions, native"]),
    ("launch module with a space",
     {"sglang_launch_modules": {"sglang": "sglang launch_server", "vllm": "vllm.entrypoints.cli.main"}},
     ["sglang_launch_modules = {'sglang': 'sglang launch_server', 'vllm': 'vllm.entrypoints.cli.main'} "
      "is not valid: a mapping of each engine"]),
    # profiles that inherit (sglang_perf/plan/inherit.py): a base that cannot be resolved
    ("profile based on itself", dict(profile(), sglang_profiles={"mine": dict(P3, base="mine")}),
     ["sglang_profiles.mine.base names the profile itself"]),
    ("profile based on a profile that does not exist", dict(profile(), sglang_profiles={
        "mine": dict(P3, base="nextn_3stpe")}),
     ["sglang_profiles.mine.base = 'nextn_3stpe': no such profile in sglang_profiles (known: mine)"]),
    ("profiles based on each other", dict(profile(), sglang_profiles={
        "mine": dict(P3, base="yours"), "yours": {"base": "mine", "tp_size": 2}}),
     ["sglang_profiles: the bases of mine, yours form a cycle (mine -> yours -> mine)"]),
    ("unknown engine", {"sglang_engine": "tgi"},
     ["sglang_profiles.nextn_3step.engine (or sglang_engine) must be one of sglang, vllm, got 'tgi'"]),
    ("service as root", {"sglang_user": "root"},
     ["sglang_user = root is not valid: a non-root user name"]),
    ("firewall network without a prefix", {"sglang_allowed_networks": ["10.1.230.0"]},
     ["sglang_allowed_networks", "is not valid: CIDR networks such as 10.1.230.0/24"]),
    ("readiness timeout too short", {"sglang_ready_timeout": 5},
     ["sglang_ready_timeout = 5 is not valid: seconds >= 30"]),
    # fleets: the rollout's batch sizes and multi-node groups that cannot work
    ("rollout batch of 0%", {"sglang_rollout_batch": "0%"},
     ["sglang_rollout_batch must be a number of hosts >= 1 or a percentage such as 25%"]),
    ("negative canary", {"sglang_rollout_canary": -1},
     ["sglang_rollout_canary must be a number of hosts >= 0 (0: no canary), got -1"]),
    ("multi-node group that does not exist", {"sglang_multinode_group": "qwen_pair"},
     ["sglang_multinode_group: 'qwen_pair' is not an inventory group"]),
    ("multi-node group of one host", {"sglang_multinode_group": "sglang_servers"},
     ["multi-node deployment sglang_servers (hosts ct-local): a multi-node deployment needs at least 2 "
      "hosts"]),
]

# Refused by what only the host can tell (roles/sglang_gate/tasks/host_checks.yml on the host): the
# plan passes them; the preflight on the container refuses them.
HOST_SIDE = {"gate history on a kernel file system", "gate history path is a directory",
             "gate history in a directory nobody creates"}

# One case of each class of refusal the plan makes, run end to end through the preflight (the
# rest of the matrix is the plan's alone): role values, argument-spec types, the profile, the
# memory budget, the gate's thresholds and the roofline, the bind address, the driver against
# the release's CUDA runtime, a secret (never echoed), the GPU stack, the rollout, the topology.
END_TO_END = {"port out of range", "port as text", "original launch: draft tokens without steps",
              "profile that does not fit in GPU memory", "no thresholds for the profile",
              "decode threshold above the roofline", "LAN bind without a key, networks or opt-in",
              "driver too old for the CUDA runtime", "API key too short", "GPU memory in GB",
              "rollout batch of 0%", "multi-node group of one host"} | HOST_SIDE
