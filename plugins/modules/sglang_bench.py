#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Benchmark an SGLang or vLLM server and gate on decode speed and speculative accept length
description:
  - Sends warmup requests (discarded), then O(requests) streamed requests at O(concurrency) to a
    running SGLang or vLLM 0.33 server, and measures per request the time to first token, the
    decode speed (tokens after the first over the time from the first to the last token) and the
    speculative accept length from the engine's own per-request counters (SGLang's
    C(spec_verify_ct); vLLM's C(metrics.speculative_decoding) on the final usage chunk, which needs
    C(--per-request-spec-decode-metrics summary)), never from a cumulative server average, which
    includes warmup.
  - The engine is recognised from the server (SGLang's C(/server_info); vLLM's C(/version) without
    it). One accept length for both - completion tokens / verify steps (SGLang's
    C(spec_verify_ct), vLLM's C(num_spec_steps)) - so thresholds, history and the roofline mean the
    same; vLLM's own C(1 + accepted / drafts) is reported beside it as C(engine_accept_len).
  - Reports median, min, max and spread of per-request decode tok/s, the accept length (total
    tokens / total verify steps, also per prompt case and per draft position), aggregate tok/s at
    the concurrency, TTFT and inter-token latency percentiles and every error. When the server
    exposes C(/metrics) (SGLang's C(--enable-metrics); vLLM always), the counter deltas over the
    measured window are reported beside the client's figures.
  - Fails when a figure is below its threshold, or when any request failed (O(max_errors)), with a
    C(msg) that states measured vs required for every failed threshold and the full result attached.
  - The engine runs under the target host's Python 3.9+ with the standard library only.
version_added: "1.0.0"
author: "sglang-deploy maintainers"
options:
  url:
    description: Base URL of the SGLang server, for example C(http://127.0.0.1:30000).
    type: str
    required: true
  api_key:
    description: The server's C(--api-key), sent as a bearer token. Never logged.
    type: str
  model:
    description: Model name to request; by default the first model listed at C(/v1/models).
    type: str
  api:
    description:
      - Which endpoint to stream from. C(chat) is C(/v1/chat/completions) (thinking included via
        SGLang's C(reasoning_content), vLLM's C(reasoning)), C(completions) is C(/v1/completions),
        C(native) is SGLang's C(/generate) (prompt sent as raw text, no chat template; vLLM serves
        none and is refused).
    type: str
    choices: [chat, completions, native]
    default: chat
  concurrency:
    description: Requests in flight at once during the measured phase.
    type: int
    default: 1
  requests:
    description:
      - Measured requests before the first verdict. Each threshold is judged on its interval at
        O(confidence) - cleared when the bound on its side is past it, failed when the other bound
        is - and while one is in between, one more request at a time is measured up to
        O(max_requests).
    type: int
    default: 8
  max_requests:
    description:
      - The most measured requests (default O(requests), a fixed sample). A threshold still inside
        its interval then is inconclusive (see O(inconclusive)). A median's interval (O(min_tok_s),
        O(max_ttft_s), the regression check) takes at least 6 requests at 95%; fewer are refused.
    type: int
  confidence:
    description:
      - Level of the two-sided intervals. Per-request median decode tok/s and TTFT by order
        statistics (distribution-free), accept length and aggregate tok/s by the bootstrap,
        requests resampled (a ratio of sums).
    type: float
    default: 0.95
  inconclusive:
    description:
      - What an inconclusive verdict (a threshold inside its interval at O(max_requests)) does -
        C(fail) the run, or C(pass) it with the verdict reported as inconclusive.
    type: str
    choices: [fail, pass]
    default: fail
  warmup:
    description: Requests sent first and discarded (JIT / CUDA graph warmup).
    type: int
    default: 2
  max_tokens:
    description: Tokens each request generates (sent with C(ignore_eos); shorter outputs are
      reported and excluded from the decode figures).
    type: int
    default: 1024
  warmup_max_tokens:
    description: Tokens each warmup request generates (enough to run the first decode batches).
    type: int
    default: 32
  temperature:
    description: Sampling temperature of the benchmark requests.
    type: float
    default: 0.0
  prompts:
    description:
      - What the measured requests send. C(coding) cycles the coding prompts; C(prose) cycles
        essays and chat (drafts are accepted less often on them than on code); C(long_context) sends
        a repository slice (code and documents shipped in C(sglang_perf/corpus.py)) of about
        O(prompt_tokens) tokens, a different slice per request. Every measured prompt starts with
        a request tag of its own, and warmup prompts are never measured ones, so no measured
        request finds its prefix in the radix cache. The server's own count
        (C(usage.prompt_tokens)) is reported; characters per token are learned from the warmup.
    type: str
    choices: [coding, prose, long_context]
    default: coding
  prompt_tokens:
    description: Target prompt length of C(long_context) requests, in the server's tokens.
    type: int
  max_ttft_s:
    description: Allowed median time to first token, seconds.
    type: float
  chars_per_token:
    description: Characters per server token of the long-context corpus; learned from the warmup
      when not given (a corpus sample and a short prompt, the difference of their token counts).
    type: float
  case:
    description: A name for the run in the result and messages (a gate plan case's name); default
      the prompt source.
    type: str
  plan:
    description:
      - A gate plan (the sglang_gate role's C(sglang_gate_plan)) - named cases, each with
        C(prompts), C(prompt_tokens), C(concurrency), C(requests), C(max_tokens). When given, the
        module runs every case after one warmup and judges each on its own with its thresholds
        from O(thresholds) (and O(calibrated)) for O(profile), after checking the server's
        capacity against O(promise); the single-case options (O(prompts), O(concurrency),
        O(requests), O(max_tokens), O(min_tok_s), ...) are not used then.
    type: dict
  thresholds:
    description: With O(plan), thresholds per profile per case (C(sglang_gate_thresholds)).
    type: dict
  calibrated:
    description: With O(plan), a host's measured thresholds per profile per case
      (C(sglang_gate_calibrated), written by C(playbooks/calibrate.yml)); they win key by key.
    type: dict
  profile:
    description: With O(plan), the profile the server runs (whose thresholds apply).
    type: str
  promise:
    description: With O(plan), what the profile promises (C(context_length),
      C(max_running_requests)); the gate fails when the server's figures (SGLang's
      C(/server_info); vLLM's C(max_model_len) and KV capacity) cannot hold it.
    type: dict
  connect_timeout:
    description: Seconds to open a connection.
    type: float
    default: 5
  first_token_timeout:
    description: Seconds from sending a request to its first token.
    type: float
    default: 120
  stall_timeout:
    description: Seconds allowed between two chunks of a stream.
    type: float
    default: 30
  run_timeout:
    description: Seconds for the whole run, warmup included; requests still open are aborted and
      counted as errors.
    type: float
    default: 1800
  metrics:
    description:
      - Cross-check with C(/metrics) counter deltas. C(auto) uses them when exposed, C(always)
        fails the gate when the server exposes none, C(never) does not scrape.
    type: str
    choices: [auto, always, never]
    default: auto
  validate_certs:
    description: Verify TLS certificates for C(https) URLs.
    type: bool
    default: true
  min_tok_s:
    description: Required per-request median decode tok/s.
    type: float
  min_accept_len:
    description: Required speculative accept length (completion tokens / verify steps, for either
      engine; not vLLM's C(1 + accepted / drafts)).
    type: float
  min_aggregate_tok_s:
    description: Required aggregate tok/s at O(concurrency).
    type: float
  max_errors:
    description: Failed requests (warmup included) the gate tolerates.
    type: int
    default: 0
  per_request:
    description: Include the per-request records in the result.
    type: bool
    default: true
  model_size:
    description:
      - Size figures of the model (C(params_b), C(dtype_bytes), C(lm_head_params_b),
        C(mtp_layer_params_b), ...; see C(plugins/module_utils/sglang_perf/capacity.py)). With
        O(hardware), the result states the decode bandwidth roofline and the measured share of it.
    type: dict
  hardware:
    description: The host's GPUs (C(gpu_count), C(gpu_bandwidth_gbs) per GPU, C(gpu_memory_gib)).
    type: dict
  baseline:
    description:
      - Figures to compare with (C(decode_tok_s), C(accept_len), optional C(time), C(profile),
        C(intervals) as a result gives them); the result's C(regression) gives the change in
        percent. Without C(intervals) its noise is taken to be this run's.
    type: dict
  baseline_history:
    description:
      - Path on the host of the gate history (JSON lines). When O(baseline) is not given, the
        newest passing run of O(baseline_profile) in it is the baseline, else the host's
        last-known-good run of another profile (its change is reported and attributed, never
        judged by O(max_regression_pct)). A missing file means no baseline (a first deploy).
      - Each case's change is split into its accept-length and step-time parts, each with its
        interval over both runs' noise (this run's intervals and the baseline's, from its record),
        with the cause - C(acceptance), C(system), C(both) or C(none) - in the case's
        C(attribution). A cause is named only when the decode change is outside both runs' noise.
      - A failed case's message names its cause against the baseline, named for what it is (its
        profile's last pass and time, or the host's last-known-good of another profile), whether
        O(max_regression_pct) is set or not.
    type: path
  baseline_profile:
    description: The profile whose last passing run in O(baseline_history) is the baseline.
    type: str
  max_regression_pct:
    description: Fail when decode tok/s or accept length dropped more than this percentage from
      the baseline run of the same profile. Unset - changes are reported only.
    type: float
  measure_lock:
    description:
      - Path on the host of its measurement lock (an C(flock) on the file, created when missing;
        the deploy plan's C(lock.measure_path), beside the deploy lock). Held while this run sends
        its requests, so it never measures beside the watch's probe (roles/sglang_watch takes the
        same lock, without waiting); unset - no lock. Not taken in check mode.
    type: path
  measure_lock_wait:
    description:
      - Seconds to wait for the measurement lock while another holder has it (a running probe takes
        seconds); then the module fails, naming the lock, and measures nothing.
    type: int
    default: 600
  nvidia_smi:
    description:
      - With O(plan), the nvidia-smi whose answers make the host's fingerprint, taken before the
        warmup (per GPU name, driver, power limits, max, application and current clocks, the
        active clock-event reasons, PCIe generation and width, persistence mode, ECC;
        C(nvidia-smi topo -m)'s links), a name looked up on the host's PATH or an
        absolute path. An empty string asks nothing. One that is missing, fails or hangs (30 s)
        leaves the GPUs out and says why in C(fingerprint.nvidia_smi); the benchmark runs on.
    type: str
    default: nvidia-smi
  identity:
    description:
      - With O(plan), what else the fingerprint records - C(engine), C(version), C(release),
        C(profile), C(profile_sha256) (the hash of the profile's settings).
      - The fingerprint is compared with the baseline's; the differences come first in the message
        (C(fingerprint_changes)).
    type: dict
attributes:
  check_mode:
    support: full
    details: In check mode no benchmark runs; the module probes C(/health) and C(/v1/models) and
      reports whether the server is ready.
  diff_mode:
    support: none
notes:
  - The benchmark only reads from the server; it never reports C(changed).
  - vLLM 0.33 does not expose C(max_num_seqs) or its speculative method (only its dev-mode
    C(/server_info) under C(VLLM_SERVER_DEV_MODE) does); C(server.not_exposed) names what is
    missing and the plan's capacity check lists each need it could not verify in
    C(capacity.unverified) and its notes.
seealso:
  - name: SGLang server arguments
    description: The flags whose effect this module measures.
    link: https://docs.sglang.ai/advanced_features/server_arguments.html
  - name: vLLM speculative decoding acceptance metrics
    description: The per-request and C(/metrics) figures the module reads from vLLM.
    link: https://docs.vllm.ai/en/latest/features/speculative_decoding/
"""

EXAMPLES = r"""
- name: Gate the deploy on the 3-step NEXTN profile's figures
  sglang_bench:
    url: "http://127.0.0.1:30000"
    api_key: "{{ sglang_api_key }}"
    concurrency: 1
    requests: 8
    warmup: 2
    max_tokens: 1024
    min_tok_s: 45
    min_accept_len: 2.8
  register: gate

- name: Aggregate throughput at four concurrent streams, no accept-length threshold
  sglang_bench:
    url: "http://127.0.0.1:30000"
    concurrency: 4
    requests: 8
    min_aggregate_tok_s: 180

- name: Show the figures
  ansible.builtin.debug:
    msg: "{{ gate.decode_tok_s.median | round(1) }} tok/s, accept length {{ gate.accept_len | round(2) }}"
"""

RETURN = r"""
passed:
  description: Whether the verdict is C(pass) (or C(inconclusive) with O(inconclusive=pass)).
  returned: when the benchmark ran
  type: bool
verdict:
  description: C(pass) (every threshold cleared by its interval), C(fail) (one is past it, or too
    many requests failed) or C(inconclusive) (one still inside its interval at O(max_requests)).
  returned: when the benchmark ran
  type: str
  sample: pass
intervals:
  description: The judged figures with their intervals at O(confidence), each C(estimate),
    C(lower), C(upper) (null below the requests an interval needs), C(n), C(method).
  returned: when the benchmark ran
  type: dict
  contains:
    level: {description: The two-sided level, type: float}
    decode_tok_s: {description: Per-request median decode tok/s (order statistics), type: dict}
    accept_len: {description: Accept length (bootstrap of the ratio of sums), type: dict}
    aggregate_tok_s: {description: Aggregate tok/s (bootstrap over requests), type: dict}
    ttft_s: {description: Median time to first token (order statistics), type: dict}
  sample: {level: 0.95, decode_tok_s: {estimate: 57.4, lower: 53.4, upper: 63.1, n: 6}}
judged:
  description: Every threshold with its state (C(pass), C(fail), C(undecided) before the last
    request, C(inconclusive)), the figure, its bounds and a message.
  returned: when the benchmark ran
  type: list
inconclusive:
  description: The thresholds left inside their intervals at O(max_requests), with the band and
    the next step in each message.
  returned: when the benchmark ran
  type: list
sequential:
  description: C(min_requests), C(max_requests), C(measured), C(looks) (verdicts taken while
    measuring; 0 for a fixed sample, judged once at its end) and C(stopped) (C(decided) before the
    maximum, or C(max_requests)).
  returned: when the benchmark ran
  type: dict
decode_tok_s:
  description: Per-request decode tok/s over the measured requests that produced O(max_tokens).
  returned: when the benchmark ran
  type: dict
  contains:
    median: {description: Median, type: float}
    min: {description: Minimum, type: float}
    max: {description: Maximum, type: float}
    mean: {description: Mean, type: float}
    stdev: {description: Sample standard deviation, type: float}
    spread_pct: {description: (max - min) / median in percent, type: float}
    n: {description: Requests counted, type: int}
  sample: {median: 54.8, min: 52.1, max: 57.3, spread_pct: 9.5, n: 8}
accept_len:
  description: Total completion tokens / total verify steps of the measured requests (SGLang's
    per-request C(spec_verify_ct), vLLM's C(num_spec_steps)), the same convention for both engines;
    null when the server reports no speculative counters.
  returned: when the benchmark ran
  type: float
  sample: 3.16
accept_len_convention:
  description: How C(accept_len) is counted (the prefill's token of each request included).
  returned: when the benchmark ran
  type: str
engine_accept_len:
  description: vLLM's own accept length, C(1 + accepted draft tokens / verify steps) (its
    C(mean_acceptance_length), the prefill's token not counted), over the measured requests;
    null for SGLang, whose own is C(accept_len).
  returned: when the benchmark ran
  type: float
  sample: 3.05
engine_accept_len_convention:
  description: How C(engine_accept_len) is counted; null without it.
  returned: when the benchmark ran
  type: str
accept_len_by_prompt:
  description: Accept length per prompt (coding prompt name, or the long-context case).
  returned: when the benchmark ran
  type: dict
prompt_tokens:
  description: The server's own count of the measured prompts (C(usage.prompt_tokens)) - target,
    n, min, median, max.
  returned: when the benchmark ran
  type: dict
  sample: {target: 32768, n: 2, min: 32766, median: 32766, max: 32766}
cases:
  description: With O(plan), one full result per case, in plan order, each with its C(case) name,
    C(passed) and C(failures); the top-level figures are the first (headline) case's.
  returned: when the plan ran
  type: list
  elements: dict
failed_cases:
  description: With O(plan), the cases that failed (C(capacity) first when the server cannot hold
    what the profile promises or the cases need).
  returned: when the plan ran
  type: list
  elements: str
capacity:
  description: With O(plan), the server's figures (C(effective_context), C(context_length),
    C(max_total_num_tokens), C(max_running_requests), C(max_mamba_cache_size); for vLLM also
    C(kv_cache_tokens_from) and C(kv_cache_max_concurrency)), what was needed, failures, notes and
    C(unverified) - each need the server's figures cannot check (vLLM's running-request limit),
    with C(what), C(needed_by) and C(why).
  returned: when the plan ran
  type: dict
time_to_verdict_s:
  description: With O(plan), seconds from the first request to the verdict, warmup included.
  returned: when the plan ran
  type: float
accept_by_position:
  description: Share of verify steps that accepted at least 1, 2, ... draft tokens
    (from SGLang's C(spec_correct_drafts_histogram) or vLLM's C(acceptance_histogram)), when the
    server reports it.
  returned: when the benchmark ran
  type: list
  elements: float
aggregate_tok_s:
  description: All measured completion tokens over the wall time of the measured phase.
  returned: when the benchmark ran
  type: float
ttft_s:
  description: Time to first token percentiles (p50, p90, p99, max), seconds.
  returned: when the benchmark ran
  type: dict
itl_ms:
  description: Inter-token latency percentiles (p50, p90, p99, max), milliseconds, token-weighted.
  returned: when the benchmark ran
  type: dict
errors:
  description: Failed requests, warmup included.
  returned: when the benchmark ran
  type: int
error_kinds:
  description: Failed requests per kind (connect, auth, http_500, first_token_timeout, stall,
    truncated, server_error, protocol, aborted, ...).
  returned: when the benchmark ran
  type: dict
error_details:
  description: One entry per failed request with its rid, phase, kind and message.
  returned: when the benchmark ran
  type: list
  elements: dict
excluded_short:
  description: Requests that stopped before O(max_tokens), excluded from the decode figures.
  returned: when the benchmark ran
  type: int
metrics:
  description: C(/metrics) counter deltas over the measured window (C(kind), generation tokens,
    verify calls - vLLM's C(spec_decode_num_drafts) - and their C(accept_len) in the convention of
    C(accept_len)) and whether they match what the client received (C(matches_client); for vLLM
    also C(matches_client_verify), its drafts against the requests' verify steps). For vLLM also
    C(draft_tokens), C(accepted_tokens), C(engine_accept_len) (1 + accepted / drafts),
    C(acceptance_rate) (accepted / draft tokens) and C(by_position) (accepted per position /
    drafts). Null when the server exposes no metrics.
  returned: when the benchmark ran
  type: dict
server:
  description:
    - What the server says about itself; C(kind) is C(sglang), C(vllm) or C(unknown).
    - SGLang, from C(/server_info) - version, resolved speculative settings, its capacity and its
      cumulative accept length, which includes warmup and is not used.
    - vLLM - C(version) (C(/version)), C(context_length) (the model card's C(max_model_len)),
      C(max_total_num_tokens) (C(vllm:cache_config_info)'s group-aware C(kv_cache_size_tokens),
      else C(num_gpu_blocks x block_size); C(kv_cache_tokens_from) says which), C(num_gpu_blocks),
      C(block_size), C(kv_cache_max_concurrency), C(gpu_memory_utilization),
      C(enable_prefix_caching), C(mamba_cache_mode), C(num_speculative_tokens) and
      C(speculative_num_steps) (from the per-position spec counters or the responses'
      C(num_spec_tokens)), C(speculative_algorithm) (C(unreported) when speculation runs but vLLM
      does not name its method), C(max_running_requests) (null - C(max_num_seqs) is exposed only
      by the dev-mode C(/server_info)) and C(not_exposed), each missing figure with why.
  returned: always
  type: dict
failures:
  description: One entry per failed threshold with measured, required and a message.
  returned: when the benchmark ran
  type: list
  elements: dict
per_request:
  description: Per-request records (warmup and measured), each with C(verify_ct), C(accept_len)
    (completion tokens / verify steps) and, for vLLM, C(engine_accept_len) (1 + accepted / steps).
  returned: when the benchmark ran and O(per_request) is true
  type: list
  elements: dict
roofline:
  description: The decode bandwidth ceiling for the host and the server's speculative steps
    (GPUs x bandwidth / bytes per verify cycle x accept length), with every input and the measured
    share in percent.
  returned: when the benchmark ran and O(model_size) and O(hardware) are given
  type: dict
  sample: {ceiling_tok_s: 73.4, share_pct: 74.1, bytes_per_cycle_gb: 65.74, cycles_per_s: 23.37}
regression:
  description: The baseline and the change of decode tok/s and accept length from it, in percent
    (negative is a drop).
  returned: when the benchmark ran and a baseline was given or found
  type: dict
  sample: {decode_tok_s_pct: -2.1, accept_len_pct: 0.4, baseline: {decode_tok_s: 55.4, accept_len: 3.13}}
attribution:
  description:
    - The change from the baseline split into its parts (decode tok/s = accept length / verify-step
      time) - C(tok_s_pct), C(accept_len_pct), C(step_time_pct) (a slower step is +), each with
      C(..._pct_interval) over both runs' noise (null without this run's interval) - and
      C(moved) (the decode change is outside both runs' noise), C(baseline_noise) (C(recorded),
      or C(assumed) - as this run's), C(cause) (C(acceptance), C(system), C(both) or C(none)),
      C(note) (why none), C(text) and C(against) (the baseline, named).
  returned: when the benchmark ran and a baseline was given or found
  type: dict
  sample: {tok_s_pct: -34.3, tok_s_pct_interval: [-38.3, -33.1], accept_len_pct: -46.4,
           step_time_pct: -18.4, moved: true, cause: acceptance}
fingerprint:
  description: The host's fingerprint (see O(nvidia_smi) and O(identity)) with C(prompts), the prompt
    set of each case (its source and the hash of its texts).
  returned: when a plan ran
  type: dict
fingerprint_changes:
  description: What differs from the baseline's fingerprint, the host first, each as a phrase.
  returned: when a plan ran
  type: list
  elements: str
  sample: ["GPU 1: power limit 300 W -> 250 W", "GPU 1: SM clock capped at 1,400 MHz"]
notes:
  description: Remarks about the run (excluded requests, missing counters, missing metrics).
  returned: when the benchmark ran
  type: list
  elements: str
ready:
  description: In check mode, whether the server answered C(/health) 200 and listed the model.
  returned: in check mode
  type: bool
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf import engine, fingerprint, history, measurelock, plan, prompts
from ansible.module_utils.sglang_perf.client import ConfigError, MeasureError

D = engine.DEFAULTS  # one set of defaults for the module, the CLI and the engine
ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True),
    model=dict(type="str"),
    api=dict(type="str", default=D["api"], choices=sorted(engine.APIS)),
    concurrency=dict(type="int", default=D["concurrency"]),
    requests=dict(type="int", default=D["requests"]),
    max_requests=dict(type="int"),
    confidence=dict(type="float", default=D["confidence"]),
    inconclusive=dict(type="str", default=D["inconclusive"], choices=list(engine.INCONCLUSIVE)),
    warmup=dict(type="int", default=D["warmup"]),
    max_tokens=dict(type="int", default=D["max_tokens"]),
    warmup_max_tokens=dict(type="int", default=D["warmup_max_tokens"]),
    temperature=dict(type="float", default=D["temperature"]),
    prompts=dict(type="str", default=D["prompts"], choices=list(prompts.PROMPT_SOURCES)),
    prompt_tokens=dict(type="int"),
    chars_per_token=dict(type="float"),
    case=dict(type="str"),
    max_ttft_s=dict(type="float"),
    plan=dict(type="dict"),
    thresholds=dict(type="dict"),
    calibrated=dict(type="dict"),
    profile=dict(type="str"),
    promise=dict(type="dict"),
    connect_timeout=dict(type="float", default=D["connect_timeout"]),
    first_token_timeout=dict(type="float", default=D["first_token_timeout"]),
    stall_timeout=dict(type="float", default=D["stall_timeout"]),
    run_timeout=dict(type="float", default=D["run_timeout"]),
    metrics=dict(type="str", default=D["metrics"], choices=list(engine.METRICS_MODES)),
    validate_certs=dict(type="bool", default=D["validate_certs"]),
    min_tok_s=dict(type="float"),
    min_accept_len=dict(type="float"),
    min_aggregate_tok_s=dict(type="float"),
    max_errors=dict(type="int", default=D["max_errors"]),
    per_request=dict(type="bool", default=True),
    model_size=dict(type="dict"),
    hardware=dict(type="dict"),
    baseline=dict(type="dict"),
    baseline_history=dict(type="path"),
    baseline_profile=dict(type="str"),
    max_regression_pct=dict(type="float"),
    nvidia_smi=dict(type="str", default="nvidia-smi"),
    identity=dict(type="dict"),
    measure_lock=dict(type="path"),
    measure_lock_wait=dict(type="int", default=600),
)
MODULE_ONLY = ("per_request", "baseline_history", "baseline_profile", "nvidia_smi", "identity",
               "measure_lock", "measure_lock_wait")
PLAN_ONLY = ("plan", "thresholds", "calibrated", "profile", "promise")
# what the plan's cases set (the single-case options that a plan run does not use)
CASE_OPTIONS = ("prompts", "prompt_tokens", "concurrency", "requests", "max_requests", "max_tokens",
                "min_tok_s", "min_accept_len", "min_aggregate_tok_s", "max_ttft_s", "max_errors", "baseline")


def last_passing(path, profile):
    """What a run of ``profile`` is compared with in the host's history (history.last_known_good:
    the profile's newest passing run, else the host's last-known-good); None without one."""
    if not path or not os.path.exists(path):
        return None
    return history.last_known_good(history.read(path), profile)


def host_fingerprint(module, name, identity):
    """fingerprint.take with the nvidia-smi ``name`` resolved on the host's PATH (and sbin)."""
    if not name:
        return fingerprint.take(fingerprint.run_argv, None, identity)
    path = name if os.path.isabs(name) else module.get_bin_path(name)
    if path is None or not os.access(path, os.X_OK):
        return fingerprint.take(fingerprint.run_argv, None, identity,
                                missing="%s: not found on the host (no GPU figures)" % name)
    return fingerprint.take(fingerprint.run_argv, path, identity)


def run_plan(module, params):
    common = {k: v for k, v in params.items()
              if k not in MODULE_ONLY + PLAN_ONLY + CASE_OPTIONS}
    return plan.run(common, params["plan"], params["thresholds"], params["profile"],
                    calibrated=params["calibrated"], promise=params["promise"],
                    baseline=params["baseline"] or last_passing(params["baseline_history"],
                                                                params["baseline_profile"]),
                    fingerprint=host_fingerprint(module, params["nvidia_smi"], params["identity"]))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_by={"baseline_history": "baseline_profile",
                                        "plan": ("thresholds", "profile")})
    params = dict(module.params)
    held = take_measure_lock(module, params)
    try:
        measure(module, params)
    finally:
        if held is not None:
            measurelock.release(held)


def take_measure_lock(module, params):
    """The host's measurement lock (the descriptor that holds it), waiting out a watch's probe;
    None without O(measure_lock) or in check mode (nothing is measured)."""
    if not params["measure_lock"] or module.check_mode:
        return None
    try:
        return measurelock.acquire(params["measure_lock"], params["measure_lock_wait"])
    except measurelock.Busy as e:
        module.fail_json(msg="could not measure %s: the host's measurement lock %s" % (params["url"], e))
    except OSError as e:
        module.fail_json(msg="could not measure %s: cannot open the host's measurement lock %s: %s"
                         % (params["url"], params["measure_lock"], e))


def measure(module, params):
    options = {k: v for k, v in params.items() if k not in MODULE_ONLY + PLAN_ONLY}
    try:
        if module.check_mode:
            if params["plan"] is not None:  # the plan is checked, the server only probed
                plan.resolve(params["plan"], params["thresholds"], params["profile"], params["calibrated"],
                             confidence=params["confidence"])
                options = {k: v for k, v in options.items() if k not in CASE_OPTIONS}
            probe = engine.probe(options)
        elif params["plan"] is not None:
            result = run_plan(module, params)
        else:
            if not options["baseline"]:
                rec = last_passing(params["baseline_history"], params["baseline_profile"])
                options["baseline"] = history.baseline(rec, profile=params["baseline_profile"]) \
                    if rec else None
            result = engine.run(options)
    except ConfigError as e:
        module.fail_json(msg="invalid option %s" % e)
    except (OSError, UnicodeDecodeError) as e:
        module.fail_json(msg="cannot read baseline_history %s: %s" % (params["baseline_history"], e))
    except MeasureError as e:
        module.fail_json(msg="could not measure %s: %s" % (options["url"], e))
    except Exception as e:  # a bug of ours must still end in a readable failure
        module.fail_json(msg="sglang_bench crashed: %s: %s" % (type(e).__name__, e),
                         exception=traceback.format_exc())
    if module.check_mode:
        state = "ready" if probe["ready"] else "not ready"
        module.exit_json(changed=False, msg="check mode: benchmark not run; server %s: %s"
                         % (state, probe.get("reason")), **probe)
    cases = result["cases"] if params["plan"] is not None else [result]
    if not params["per_request"]:
        for case in cases:
            case.pop("per_request", None)
        result.pop("per_request", None)
    if params["plan"] is not None:
        msg = plan.summary(result) if result["passed"] else plan.failure_message(result)
    else:
        msg = summary(result) if result["passed"] else engine.failure_message(result)
    if not result["passed"]:
        module.fail_json(msg=msg, **result)
    module.exit_json(changed=False, msg=msg, **result)


def summary(result):
    al = result["accept_len"]
    ctx = engine.context_line(result)
    iv = result.get("intervals") or {}
    return "%s: decode %s tok/s median (%g%% interval; min %.1f, max %.1f), accept length %s, %s tok/s " \
           "aggregate at C=%d, %d requests, %d errors%s" % (
               "passed" if result["verdict"] == "pass" else "inconclusive, passed (inconclusive: pass)",
               engine.fmt_interval(iv.get("decode_tok_s")), 100 * iv.get("level", 0),
               result["decode_tok_s"]["min"], result["decode_tok_s"]["max"],
               "n/a" if al is None else engine.fmt_interval(iv.get("accept_len"), ".2f"),
               engine.fmt_interval(iv.get("aggregate_tok_s")), result["concurrency"], result["requests"],
               result["errors"], "; " + ctx if ctx else "")


if __name__ == "__main__":
    main()
