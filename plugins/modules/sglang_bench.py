#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_bench
short_description: Run a resolved gate plan against an SGLang or vLLM server and judge each case
description:
  - Runs the resolved cases of a gate plan (the deploy plan's C(gate.cases), each case's prompts,
    concurrency, sample size and thresholds already chosen on the controller) against a running
    SGLang or vLLM 0.33 server, after one warmup and a check of the server's capacity against
    O(promise), and judges each case on its own. Measuring one case by hand is
    C(python -m bench run).
  - Per request it measures the time to first token, the decode speed and the speculative accept
    length from the engine's own per-request counters (SGLang's C(spec_verify_ct), vLLM's
    C(num_spec_steps)), never a cumulative server average. When the server exposes C(/metrics),
    its counter deltas are reported beside the client's figures.
  - Fails when a judged case fails a threshold, a request failed or the server cannot hold what
    the profile promises, with a C(msg) naming every failure (measured vs required) and the full
    result attached.
  - The engine runs under the target host's Python 3.9+ with the standard library only.
version_added: "1.0.0"
author: "sglang-deploy maintainers"
options:
  cases:
    description: The resolved cases in order, each C(case), C(description), C(options) (prompts,
      prompt_tokens, concurrency, requests, max_requests, max_tokens), C(thresholds),
      C(report_only), C(source).
    type: list
    elements: dict
    required: true
  profile:
    description: The profile the server runs; its history records are the baseline.
    type: str
    required: true
  promise:
    description: What the profile promises (C(context_length), C(max_running_requests)), checked
      against the server's capacity.
    type: dict
  notes:
    description: Remarks about the plan itself (the deploy plan's C(gate.notes)), added to the
      result's.
    type: list
    elements: str
    default: []
  answers:
    description: A host's own known answers for the quality checks, the text of a JSONL file (one
      row per line, C({"prompt", "answer"}) or C({"prompt", "tools", "call"})); its rows replace
      the built-in ones of their kind. Omitted, the built-in set is asked.
    type: str
  answers_source:
    description: What O(answers) is called in messages and the history (the file's path and hash).
    type: str
    default: sglang_gate_answers
  url:
    description: Base URL of the server, for example C(http://127.0.0.1:30000).
    type: str
    required: true
  api_key:
    description: The server's API key, sent as a bearer token. Never logged.
    type: str
  model:
    description: Model name to request; by default the first one listed at C(/v1/models).
    type: str
  api:
    description: Endpoint to stream from - C(/v1/chat/completions), C(/v1/completions) or SGLang's
      C(/generate).
    type: str
    choices: [chat, completions, native]
    default: chat
  confidence:
    description: Level of the two-sided intervals each threshold is judged on.
    type: float
    default: 0.95
  inconclusive:
    description: Whether a threshold still inside its interval at a case's C(max_requests) fails the
      run or passes it.
    type: str
    choices: [fail, pass]
    default: fail
  warmup:
    description: Requests sent once before the first case and discarded.
    type: int
    default: 2
  warmup_max_tokens:
    description: Tokens each warmup request generates.
    type: int
    default: 32
  temperature:
    description: Sampling temperature of the requests.
    type: float
    default: 0.0
  chars_per_token:
    description: Characters per server token of the long-context corpus; learned from the warmup
      when not given.
    type: float
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
    description: Seconds for a run, warmup included; requests still open are aborted and counted as
      errors.
    type: float
    default: 1800
  metrics:
    description: Cross-check with C(/metrics) counter deltas when exposed (C(auto)), require them
      (C(always)) or not scrape.
    type: str
    choices: [auto, always, never]
    default: auto
  validate_certs:
    description: Verify TLS certificates for C(https) URLs.
    type: bool
    default: true
  model_size:
    description: Size figures of the model (see C(sglang_perf/capacity.py)); with O(hardware), each
      case states its roofline share.
    type: dict
  hardware:
    description: The GPUs serving the model (C(gpu_count), C(gpu_bandwidth_gbs), C(gpu_memory_gib)).
    type: dict
  max_regression_pct:
    description: Fail a judged case whose decode tok/s or accept length dropped more than this from
      the profile's last pass; unset - reported only.
    type: float
  baseline:
    description: A history record to compare with, in place of the newest one O(baseline_history)
      gives.
    type: dict
  baseline_history:
    description: The host's gate history (JSON lines); the profile's newest passing run, else the
      host's
      last-known-good, is the baseline each case's change is reported and attributed against.
      Missing - no baseline.
    type: path
  per_request:
    description: Include the per-request records in each case's result.
    type: bool
    default: true
  nvidia_smi:
    description: The nvidia-smi whose answers make the host's fingerprint and say what held the
      GPUs' clocks down during the run (a name on PATH or an absolute path; '' asks nothing).
    type: str
    default: nvidia-smi
  identity:
    description: What else the fingerprint records (C(engine), C(version), C(release), C(profile),
      C(profile_sha256)), and the weights served, C(model) and C(drafter) (each C(repo), C(revision),
      C(path) or null), whose commits it reads from their directories.
    type: dict
  measure_lock:
    description: The host's measurement lock (an C(flock) file), held while requests are sent; unset
      - no lock.
    type: path
  measure_lock_wait:
    description: Seconds to wait for the measurement lock before failing, naming it.
    type: int
    default: 600
attributes:
  check_mode:
    support: full
    details: In check mode the cases are checked and stated, and the server only probed (C(/health),
      C(/v1/models)).
  diff_mode:
    support: none
notes:
  - The benchmark only reads from the server; it never reports C(changed).
  - The cases are resolved once, on the controller (C(sglang_perf/plan.py) C(resolve), through the
    C(sglang_deploy_plan) action or C(sglang_compare_plan)).
seealso:
  - name: vLLM speculative decoding acceptance metrics
    description: The per-request and C(/metrics) figures the module reads from vLLM.
    link: https://docs.vllm.ai/en/latest/features/speculative_decoding/
"""

EXAMPLES = r"""
- name: Benchmark the server with the deploy plan's resolved gate cases
  sglang_bench:
    url: "{{ sglang_deploy_plan.local_url }}"
    api_key: "{{ sglang_api_key | default(omit, true) }}"
    cases: "{{ sglang_deploy_plan.gate.cases }}"
    profile: "{{ sglang_deploy_plan.profile }}"
    promise: "{{ sglang_deploy_plan.gate.promise }}"
  register: gate

- name: Show the figures
  ansible.builtin.debug:
    msg: "{{ gate.msg }}"
"""

RETURN = r"""
passed:
  description: Whether the verdict is C(pass) (or C(inconclusive) with O(inconclusive=pass)) and
    capacity held.
  returned: when the plan ran
  type: bool
verdict:
  description: C(pass), C(fail) (capacity, a threshold or a failed request) or C(inconclusive).
  returned: when the plan ran
  type: str
  sample: pass
profile:
  description: O(profile).
  returned: when the plan ran
  type: str
cases:
  description:
    - One full result per case, in order - C(case), C(passed), C(verdict), C(failures), C(judged),
      C(intervals), C(sequential), C(decode_tok_s) (median, min, max, spread), C(accept_len)
      (completion tokens / verify steps for either engine), C(engine_accept_len) (vLLM's own),
      C(accept_len_by_prompt), C(accept_by_position), C(aggregate_tok_s), C(ttft_s), C(itl_ms),
      C(prompt_tokens), C(errors), C(error_kinds), C(error_details), C(excluded_short), C(metrics)
      (C(/metrics) deltas), C(roofline), C(regression), C(attribution) (the change from the
      baseline split into its accept-length and step-time parts), C(threshold_source),
      C(prompt_set), C(report_only), C(time_to_verdict_s) and C(per_request) (O(per_request)).
  returned: when the plan ran
  type: list
  elements: dict
headline:
  description: The first case's name; its figures (C(decode_tok_s), C(accept_len),
    C(aggregate_tok_s),
    C(ttft_s), C(itl_ms), C(intervals), C(roofline), C(regression), C(attribution), ...) are also at
    the top level.
  returned: when the plan ran
  type: str
failures:
  description: Every failed threshold with C(case), C(measured), C(required) and C(message).
  returned: when the plan ran
  type: list
  elements: dict
failed_cases:
  description: The cases that failed, C(capacity) first when the server cannot hold what is promised
    or needed.
  returned: when the plan ran
  type: list
  elements: str
inconclusive_cases:
  description: The judged cases left inconclusive.
  returned: when the plan ran
  type: list
  elements: str
capacity:
  description: The server's figures, what the promise and the cases need, C(failures), C(notes) and
    C(unverified) (needs the server's figures cannot check, with why).
  returned: when the plan ran
  type: dict
server:
  description: What the server says about itself (C(kind) - C(sglang), C(vllm) or C(unknown) -
    version,
    speculative settings, capacity, C(not_exposed)).
  returned: when the plan ran
  type: dict
errors:
  description: Failed requests over every case, warmup included.
  returned: when the plan ran
  type: int
time_to_verdict_s:
  description: Seconds from the first request to the verdict, warmup included.
  returned: when the plan ran
  type: float
fingerprint:
  description: The host's fingerprint (GPUs from O(nvidia_smi), O(identity), each case's prompt
    set), and in C(held_down) what held the GPUs' clocks down from its start to the run's end (the
    clock-event counters read at both ends, or the active reasons sampled each second where the
    driver has no counters; C(how), C(seconds), C(held) per GPU and reason with its C(seconds) and
    C(share) of the time, at least C(floor)).
  returned: when the plan ran
  type: dict
fingerprint_changes:
  description: What differs from the baseline's fingerprint, each as a phrase; a slowdown that
    held a GPU during this run and not the baseline's (or the reverse) among them.
  returned: when the plan ran
  type: list
  elements: str
  sample: ["GPU 1: power limit 300 W -> 250 W", "GPU 0: held by sw_thermal_slowdown for 62% of the
    measurement (31 of 50 s)"]
slowdowns:
  description: Each slowdown that held a GPU's clocks down during the run and is not named in
    RV(fingerprint_changes) (the baseline was held by it too, with its share; or there is no
    baseline to compare).
  returned: when the plan ran
  type: list
  elements: str
  sample: ["GPU 0 held by sw_power_cap for 45% of the measurement (23 of 50 s; 40% in the
    last-known-good's)"]
notes:
  description: Remarks about the plan and the run (O(notes), capacity not verified, ...).
  returned: when the plan ran
  type: list
  elements: str
plan:
  description: In check mode, the cases that would run, in one line.
  returned: in check mode
  type: str
ready:
  description: In check mode, whether the server answered C(/health) 200 and listed the model.
  returned: in check mode
  type: bool
"""

import os
import traceback

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf import answers, config, engine, fingerprint, history, measurelock
from ansible.module_utils.sglang_perf import plan, verdict
from ansible.module_utils.sglang_perf.client import ConfigError, MeasureError

D = config.DEFAULTS  # one set of defaults for the module, the CLI and the engine
ARGUMENT_SPEC = dict(
    cases=dict(type="list", elements="dict", required=True),
    profile=dict(type="str", required=True),
    promise=dict(type="dict"),
    notes=dict(type="list", elements="str", default=[]),
    answers=dict(type="str"),
    answers_source=dict(type="str", default="sglang_gate_answers"),
    url=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True),
    model=dict(type="str"),
    api=dict(type="str", default=D["api"], choices=sorted(config.APIS)),
    confidence=dict(type="float", default=D["confidence"]),
    inconclusive=dict(type="str", default=D["inconclusive"], choices=list(config.INCONCLUSIVE)),
    warmup=dict(type="int", default=D["warmup"]),
    warmup_max_tokens=dict(type="int", default=D["warmup_max_tokens"]),
    temperature=dict(type="float", default=D["temperature"]),
    chars_per_token=dict(type="float"),
    connect_timeout=dict(type="float", default=D["connect_timeout"]),
    first_token_timeout=dict(type="float", default=D["first_token_timeout"]),
    stall_timeout=dict(type="float", default=D["stall_timeout"]),
    run_timeout=dict(type="float", default=D["run_timeout"]),
    metrics=dict(type="str", default=D["metrics"], choices=list(config.METRICS_MODES)),
    validate_certs=dict(type="bool", default=D["validate_certs"]),
    model_size=dict(type="dict"),
    hardware=dict(type="dict"),
    max_regression_pct=dict(type="float"),
    baseline=dict(type="dict"),
    baseline_history=dict(type="path"),
    per_request=dict(type="bool", default=True),
    nvidia_smi=dict(type="str", default="nvidia-smi"),
    identity=dict(type="dict"),
    measure_lock=dict(type="path"),
    measure_lock_wait=dict(type="int", default=600),
)
# the options that are not engine options common to every case (plan.run_cases's ``common``)
PLAN_OPTIONS = ("cases", "profile", "promise", "notes", "baseline", "baseline_history", "per_request",
                "nvidia_smi", "identity", "measure_lock", "measure_lock_wait", "answers", "answers_source")


def last_passing(path, profile):
    """What a run of ``profile`` is compared with in the host's history (history.last_known_good:
    the profile's newest passing run, else the host's last-known-good); None without one."""
    if not path or not os.path.exists(path):
        return None
    return history.last_known_good(history.read(path), profile)


def host_fingerprint(module, name, identity):
    """fingerprint.take with the nvidia-smi ``name`` resolved on the host's PATH (and sbin), and
    a watch on the GPUs' clocks started with it (fingerprint.watch; plan.run_cases stops it)."""
    path = name if not name or os.path.isabs(name) else module.get_bin_path(name)
    missing = None
    if name and (path is None or not os.access(path, os.X_OK)):
        path, missing = None, "%s: not found on the host (no GPU figures)" % name
    return (fingerprint.take(fingerprint.run_argv, path or None, identity, missing=missing),
            fingerprint.watch(fingerprint.run_argv, path or None))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
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


def would_run(common, params):
    """Check mode: the cases checked as a run checks them, and stated (plan.describe)."""
    cfgs = plan.case_configs(common, params["cases"], params["profile"])
    return plan.describe([dict(c, options=cfg) for c, cfg in zip(params["cases"], cfgs)],
                         common["confidence"], common["inconclusive"])


def given_answers(params):
    """The host's known answers (answers.parse, with where they came from), or None."""
    if params["answers"] is None:
        return None
    return dict(answers.parse(params["answers"], "answers"), source=params["answers_source"])


def measure(module, params):
    common = {k: v for k, v in params.items() if k not in PLAN_OPTIONS}
    try:
        given = given_answers(params)
        if module.check_mode:
            stated = would_run(common, params)
            probe = engine.probe(common)
        else:
            baseline = params["baseline"] or last_passing(params["baseline_history"], params["profile"])
            fp, clocks = host_fingerprint(module, params["nvidia_smi"], params["identity"])
            result = plan.run_cases(
                common, params["cases"], params["profile"], promise=params["promise"], baseline=baseline,
                fingerprint=fp, notes=params["notes"], answers=given, clocks=clocks)
    except ConfigError as e:
        module.fail_json(msg="invalid option %s" % e)
    except (OSError, UnicodeDecodeError) as e:
        module.fail_json(msg="cannot read baseline_history %s: %s" % (params["baseline_history"], e))
    except MeasureError as e:
        module.fail_json(msg="could not measure %s: %s" % (params["url"], e))
    except Exception as e:  # a bug of ours must still end in a readable failure
        module.fail_json(msg="sglang_bench crashed: %s: %s" % (type(e).__name__, e),
                         exception=traceback.format_exc())
    if module.check_mode:
        state = "ready" if probe["ready"] else "not ready"
        module.exit_json(changed=False, msg="check mode: benchmark not run; would run the %s; server %s: %s"
                         % (stated, state, probe.get("reason")), plan=stated, **probe)
    if not params["per_request"]:
        for case in result["cases"]:
            case.pop("per_request", None)
        result.pop("per_request", None)
    if not result["passed"]:
        module.fail_json(msg=verdict.failure_message(result), **result)
    module.exit_json(changed=False, msg=verdict.summary(result), **result)


if __name__ == "__main__":
    main()
