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
    the plan's C(promise), and judges each case on its own. Measuring one case by hand is
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
  gate:
    description:
      - The gate part of the host's deploy plan (C(sglang_deploy_plan.gate)), as the planner made
        it on the controller; other keys of it are not read.
      - C(profile) (required) - the profile the server runs; its history records are the baseline.
      - C(cases) (required) - the resolved cases in order, each C(case), C(description),
        C(options) (prompts, prompt_tokens, concurrency, requests, max_requests, max_tokens),
        C(thresholds), C(report_only), C(source).
      - C(options) - the engine's options common to every case (C(api), C(warmup),
        C(confidence), C(inconclusive), C(first_token_timeout), C(stall_timeout),
        C(run_timeout), C(max_regression_pct), and C(connect_timeout), C(warmup_max_tokens),
        C(temperature), C(chars_per_token), C(metrics), C(validate_certs)); the engine's defaults
        for the rest.
      - C(promise) - what the profile promises (C(context_length), C(max_running_requests)),
        checked against the server's capacity. C(notes) - remarks about the plan, added to the
        result's.
      - C(model_size), C(hardware) - the roofline's sizes (C(sglang_perf/plan/capacity.py)); each case
        states its roofline share.
      - C(history_path) - the host's gate history (JSON lines); the profile's newest passing run,
        else the host's last-known-good, is the baseline (missing - none). C(baseline) - a
        history record to compare with in its place.
      - C(nvidia_smi) - the nvidia-smi whose answers make the host's fingerprint and say what held
        the GPUs' clocks down (a name on PATH or an absolute path; '' asks nothing).
        C(identity) - what else the fingerprint records (engine, version, release, profile,
        profile_sha256, the weights served).
      - C(measure_lock) - the host's measurement lock (an C(flock) file), held while requests are
        sent; unset - no lock. C(answers.source) - what O(answers) is called in messages.
      - C(corpus_path) - the host's copy of the long-context corpus (C(sglang_perf/measure/corpus.json),
        which the sglang_gate role copies there), read for a long-context case's prompts and the
        pressure check's fillers; unset - the file beside the module's C(corpus.py), which
        AnsiballZ does not ship. A missing file fails a run that needs it, naming it; check mode
        then states the cases without checking them.
    type: dict
    required: true
  answers:
    description: A host's own known answers for the quality checks, the text of the JSONL file the
      plan's C(gate.answers.path) names (one row per line, C({"prompt", "answer"}) or C({"prompt",
      "tools", "call"})); its rows replace the built-in ones of their kind. Omitted, the built-in
      set is asked.
    type: str
  per_request:
    description: Include the per-request records in each case's result.
    type: bool
    default: true
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
  - The cases are resolved once, on the controller (C(sglang_perf/plan/gate.py) C(resolve), through the
    C(sglang_deploy_plan) action or C(sglang_compare_plan)).
seealso:
  - name: vLLM speculative decoding acceptance metrics
    description: The per-request and C(/metrics) figures the module reads from vLLM.
    link: https://docs.vllm.ai/en/latest/features/speculative_decoding/
"""

EXAMPLES = r"""
- name: Benchmark the server with the deploy plan's gate
  sglang_bench:
    url: "{{ sglang_deploy_plan.server.local_url }}"
    api_key: "{{ sglang_api_key | default(omit, true) }}"
    gate: "{{ sglang_deploy_plan.gate }}"
  register: gate

- name: Show the figures
  ansible.builtin.debug:
    msg: "{{ gate.msg }}"
"""

RETURN = r"""
passed:
  description: Whether the verdict is C(pass) (or C(inconclusive) with the plan's C(inconclusive=pass)) and
    capacity held.
  returned: when the plan ran
  type: bool
verdict:
  description: C(pass), C(fail) (capacity, a threshold or a failed request) or C(inconclusive).
  returned: when the plan ran
  type: str
  sample: pass
profile:
  description: The profile measured, O(gate)'s C(profile).
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
  description: The host's fingerprint (GPUs from the plan's C(nvidia_smi), its C(identity), each case's prompt
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
from ansible.module_utils.sglang_perf.measure import answers, config, corpus, engine
from ansible.module_utils.sglang_perf.record import fingerprint, history
from ansible.module_utils.sglang_perf.host import measurelock
from ansible.module_utils.sglang_perf.plan import gate as plan
from ansible.module_utils.sglang_perf.judge import verdict
from ansible.module_utils.sglang_perf.measure.client import ConfigError, MeasureError

ARGUMENT_SPEC = dict(
    url=dict(type="str", required=True),
    api_key=dict(type="str", no_log=True),
    model=dict(type="str"),
    gate=dict(type="dict", required=True),
    answers=dict(type="str"),
    per_request=dict(type="bool", default=True),
    measure_lock_wait=dict(type="int", default=600),
)
# the engine's options common to every case that the plan's gate.options may give (the rest of
# the engine's are each case's, the server's or only a caller's)
COMMON_OPTIONS = tuple(k for k in config.DEFAULTS if k not in plan.PER_CASE
                       and k not in config.CALLER_ONLY and k not in ("url", "api_key", "model"))
# the roofline's sizes, which the plan's gate part carries beside its options
SIZES = ("model_size", "hardware")


def gate_part(params):
    """(common engine options, the gate part) of the module's arguments; ConfigError naming what
    is missing or unknown."""
    gate = params["gate"]
    for key, kind in (("profile", str), ("cases", list)):
        if not isinstance(gate.get(key), kind):
            raise ConfigError("gate", "gate.%s is required (the deploy plan's gate part: %s)"
                              % (key, "a profile name" if kind is str else "its resolved cases"))
    options = gate.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError("gate", "gate.options must be a mapping of engine options")
    unknown = sorted(set(options) - set(COMMON_OPTIONS))
    if unknown:
        raise ConfigError("gate", "gate.options has unknown key(s) %s (known: %s)"
                          % (", ".join(unknown), ", ".join(COMMON_OPTIONS)))
    if gate.get("corpus_path") is not None and not isinstance(gate["corpus_path"], str):
        raise ConfigError("gate", "gate.corpus_path must be the path of the host's corpus.json, got %r"
                          % (gate["corpus_path"],))
    common = {k: v for k, v in options.items() if v is not None}
    common.update({k: gate[k] for k in SIZES if gate.get(k) is not None})
    common.update({k: params[k] for k in ("url", "api_key", "model") if params[k] is not None})
    return common, gate


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
    try:
        common, gate = gate_part(params)
    except ConfigError as e:
        module.fail_json(msg="invalid option %s" % e)
    # the long-context corpus from the host's copy (None: the loader's default)
    corpus.use(gate.get("corpus_path") or None)
    held = take_measure_lock(module, gate.get("measure_lock"), params)
    try:
        measure(module, params, common, gate)
    finally:
        if held is not None:
            measurelock.release(held)


def take_measure_lock(module, path, params):
    """The host's measurement lock (the descriptor that holds it), waiting out a watch's probe;
    None without one or in check mode (nothing is measured)."""
    if not path or module.check_mode:
        return None
    try:
        return measurelock.acquire(path, params["measure_lock_wait"])
    except measurelock.Busy as e:
        module.fail_json(msg="could not measure %s: the host's measurement lock %s" % (params["url"], e))
    except OSError as e:
        module.fail_json(msg="could not measure %s: cannot open the host's measurement lock %s: %s"
                         % (params["url"], path, e))


def would_run(common, gate):
    """Check mode: the cases checked as a run checks them, and stated (plan.describe); named
    only, unchecked, when the host has no corpus to check a long-context case against yet (the
    role's copy of it did not run in check mode)."""
    try:
        cfgs = plan.case_configs(common, gate["cases"], gate["profile"])
    except corpus.CorpusError as e:
        return "gate plan of the cases %s, not checked on the host: %s" % (
            ", ".join(str(c.get("case")) for c in gate["cases"]), e)
    given = dict(config.DEFAULTS, **common)
    return plan.describe([dict(c, options=o) for c, o in zip(gate["cases"], cfgs)],
                         given["confidence"], given["inconclusive"])


def given_answers(params, gate):
    """The host's known answers (answers.parse, with where they came from), or None."""
    if params["answers"] is None:
        return None
    source = (gate.get("answers") or {}).get("source") or "sglang_gate_answers"
    return dict(answers.parse(params["answers"], "answers"), source=source)


def measure(module, params, common, gate):
    history_path = gate.get("history_path")
    try:
        given = given_answers(params, gate)
        if module.check_mode:
            stated = would_run(common, gate)
            probe = engine.probe(common)
        else:
            baseline = gate.get("baseline") or last_passing(history_path, gate["profile"])
            fp, clocks = host_fingerprint(module, gate.get("nvidia_smi", "nvidia-smi"), gate.get("identity"))
            result = plan.run_cases(
                common, gate["cases"], gate["profile"], promise=gate.get("promise"), baseline=baseline,
                fingerprint=fp, notes=gate.get("notes") or [], answers=given, clocks=clocks)
    except ConfigError as e:
        module.fail_json(msg="invalid option %s" % e)
    except corpus.CorpusError as e:
        module.fail_json(msg="could not measure %s: %s" % (params["url"], e))
    except (OSError, UnicodeDecodeError) as e:
        module.fail_json(msg="cannot read the gate history %s: %s" % (history_path, e))
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
