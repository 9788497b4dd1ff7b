"""The watch's decisions (sglang_perf/host/watch.py) as Python calls: what two scrapes of /metrics say
(busy, idle, down, restarted, no metrics) at their edges, for SGLang's and vLLM's names; the
textfile it writes; the role's inputs and their refusals; the API key read from the server's
--config file; and the one-file program the role installs (plugins/filter/sglang_watch_program.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from conftest import ROOT, role_defaults
from planutil import plan_for
from plugins.filter import sglang_watch_program as flt
from sglang_perf.plan import deploy as deploy_plan
from sglang_perf import engines
from sglang_perf.measure import metrics
from sglang_perf.host import watch

GEN, VERIFY, REQS = (engines.sglang.counters[k] for k in ("generation_tokens", "verify_calls",
                                                                     "requests"))
RUNNING, QUEUED = engines.sglang.gauges["running"], engines.sglang.gauges["queued"]
ITL = engines.sglang.inter_token_latency
SETTINGS = {"labels": {"profile": "nextn_3step", "release": "0.5.23-abcdef0123", "engine": "sglang"},
            "decode_threshold": 45, "interval_s": 900.0}


def sglang(gen=None, verify=None, requests=None, running=0, queued=0, itl=None):
    """A parsed SGLang scrape: the gauges always (SGLang serves them from the start), a counter only
    once it counted (a labelled counter has no sample before), itl = (seconds, tokens)."""
    out = {RUNNING: float(running), QUEUED: float(queued), "sglang:spec_accept_length": 0.0}
    for name, value in ((GEN, gen), (VERIFY, verify), (REQS, requests)):
        if value is not None:
            out[name] = float(value)
    if itl is not None:
        out[ITL + "_sum"], out[ITL + "_count"] = float(itl[0]), float(itl[1])
    return out


def figures(obs):
    return {k: obs[k] for k in ("state", "up", "source", "accept_len", "decode_tok_s", "generation_tok_s",
                                "running", "requests")}


def test_traffic_in_the_window_gives_the_figures_from_the_counters_and_no_probe():
    before = sglang(gen=1000, verify=320, requests=10, running=1, itl=(20.0, 1100))
    after = sglang(gen=1600, verify=500, requests=14, running=2, itl=(30.0, 1650))
    obs = watch.observe_window(before, after, 10.0)
    assert figures(obs) == {"state": "busy", "up": 1, "source": "metrics",
                            "accept_len": pytest.approx(600 / 180), "decode_tok_s": pytest.approx(55.0),
                            "generation_tok_s": pytest.approx(60.0), "running": 2.0, "requests": 4.0}


@pytest.mark.parametrize("before, after, why", [
    # a request ran and finished between the two reads
    (sglang(gen=500, verify=160, requests=3), sglang(gen=596, verify=190, requests=4), "finished"),
    # the first request the server ever finished (its counters had no sample before)
    (sglang(), sglang(gen=96, verify=30, requests=1), "first"),
])
def test_tokens_generated_in_the_window_are_busy_and_never_probed(before, after, why):
    obs = watch.observe_window(before, after, 10.0)
    assert (obs["state"], obs["source"], obs["up"]) == ("busy", "metrics", 1), why
    assert obs["accept_len"] == pytest.approx(96 / 30) and obs["generation_tok_s"] == pytest.approx(9.6)
    assert obs["requests"] == 1


def test_a_running_stream_without_finished_requests_gives_the_decode_speed_from_inter_token_latency():
    before = sglang(gen=500, verify=160, requests=3, running=1, itl=(10.0, 560))
    after = sglang(gen=500, verify=160, requests=3, running=1, itl=(19.5, 1100))
    obs = watch.observe_window(before, after, 10.0)
    assert obs["state"] == "busy" and obs["decode_tok_s"] == pytest.approx(540 / 9.5)
    assert obs["accept_len"] is None and obs["generation_tok_s"] is None


@pytest.mark.parametrize("before, after", [
    (sglang(gen=500, verify=160, requests=3), sglang(gen=500, verify=160, requests=3)),
    (sglang(), sglang()),  # a server that never served a request: only its gauges
    (sglang(gen=500, verify=160, requests=3, itl=(9.0, 500)),
     sglang(gen=500, verify=160, requests=3, itl=(9.0, 500))),
    # the gauges do not decide: SGLang refreshes them only every 30 s once idle (a stale reading)
    (sglang(gen=500, verify=160, requests=3, running=2), sglang(gen=500, verify=160, requests=3, running=2)),
    (sglang(gen=500, verify=160, requests=3, queued=1), sglang(gen=500, verify=160, requests=3, queued=1)),
])
def test_no_token_generated_in_the_window_is_idle_and_due_a_probe(before, after):
    obs = watch.observe_window(before, after, 10.0)
    assert (obs["state"], obs["up"], obs["source"], obs["engine"]) == ("idle", 1, None, "sglang")
    assert (obs["accept_len"], obs["decode_tok_s"], obs["running"]) == (None, None, None)


@pytest.mark.parametrize("before, after", [
    # restarted, and served one request since; restarted, none yet
    (sglang(gen=5000, verify=1600, requests=30), sglang(gen=96, verify=30, requests=1)),
    (sglang(gen=5000, verify=1600, requests=30), sglang()),
    (sglang(gen=500, verify=160, requests=3, itl=(9.0, 500)),
     sglang(gen=500, verify=160, requests=3, itl=(1.0, 60))),
    (None, sglang(gen=96, verify=30, requests=1)),  # came up in the window
    ({engines.vllm.counters["generation_tokens"]: 10.0}, sglang(gen=96, verify=30, requests=1)),
])
def test_counters_that_went_back_or_a_new_server_give_no_figures_and_no_probe(before, after):
    obs = watch.observe_window(before, after, 10.0)
    assert figures(obs) == {"state": "restarted", "up": 1, "source": "none", "accept_len": None,
                            "decode_tok_s": None, "generation_tok_s": None, "running": None, "requests": None}
    assert obs["note"]


def test_a_server_that_does_not_answer_is_up_0_and_one_without_its_metrics_up_1_without_figures():
    down = watch.observe_window(sglang(gen=1, verify=1), None, 10.0)
    assert figures(down) == {"state": "down", "up": 0, "source": "none", "accept_len": None,
                             "decode_tok_s": None, "generation_tok_s": None, "running": None,
                             "requests": None}
    assert watch.observe_window(None, None, 0.0)["state"] == "down"
    bare = watch.observe_window({}, {}, 10.0)  # HTTP 404: SGLang without --enable-metrics
    assert (bare["state"], bare["up"], bare["source"]) == ("no_metrics", 1, "none")
    assert "--enable-metrics" in bare["note"]


def test_without_speculation_the_accept_length_is_absent():
    """No verify counter (SGLang without speculation; a real one may serve it at 0): no accept
    length, the speeds still measured."""
    for verify in (None, 0):
        before = sglang(gen=1000, verify=verify, requests=10, itl=(40.0, 1000))
        after = sglang(gen=1270, verify=verify, requests=13, itl=(50.0, 1270))
        obs = watch.observe_window(before, after, 10.0)
        assert obs["state"] == "busy" and obs["accept_len"] is None
        assert obs["generation_tok_s"] == pytest.approx(27.0) and obs["decode_tok_s"] == pytest.approx(27.0)
        assert "sglang_watch_accept_length" not in families(watch.render(SETTINGS, obs, 1.0))


def vllm(gen=None, drafts=None, requests=None, running=0, waiting=0, itl=None, accepted=None, tpot=None):
    """A parsed vLLM scrape. vLLM observes its inter-token latency once per engine step of a request
    (v1/metrics/stats.py), however many tokens the step emitted: itl = (seconds, steps); its
    time per output token once per finished request: tpot = (seconds, requests)."""
    c, g = engines.vllm.counters, engines.vllm.gauges
    out = {g["running"]: float(running), g["queued"]: float(waiting)}
    for name, value in ((c["generation_tokens"], gen), (c["verify_calls"], drafts),
                        (c["accepted_tokens"], accepted), (c["requests"], requests)):
        if value is not None:
            out[name] = float(value)
    for name, hist in ((engines.vllm.inter_token_latency, itl),
                       (engines.vllm.time_per_output_token, tpot)):
        if hist is not None:
            out[name + "_sum"], out[name + "_count"] = float(hist[0]), float(hist[1])
    return out


def test_vllm_names_busy_idle_and_a_restart():
    """vLLM counts tokens per engine step (its drafts: one per verify step of a request with
    drafts): the same decisions under its names, read from the metrics.py table."""
    # 160 verify steps in 10 s, 320 drafts accepted: 3 tokens a step, 16 steps a second
    busy = watch.observe_window(
        vllm(gen=2000, drafts=700, accepted=1300, requests=10, running=1, itl=(40.0, 700)),
        vllm(gen=2480, drafts=860, accepted=1620, requests=10, running=1, itl=(50.0, 860)), 10.0)
    assert figures(busy) == {"state": "busy", "up": 1, "source": "metrics",
                             "accept_len": pytest.approx(3.0), "decode_tok_s": pytest.approx(48.0),
                             "generation_tok_s": pytest.approx(48.0), "running": 1.0, "requests": 0.0}
    assert busy["engine"] == "vllm"
    idle = watch.observe_window(vllm(), vllm(), 10.0)
    assert (idle["state"], idle["engine"]) == ("idle", "vllm")
    restarted = watch.observe_window(vllm(gen=2000, drafts=700), vllm(gen=10, drafts=3), 10.0)
    assert restarted["state"] == "restarted"
    # vLLM counts per engine step: a request decoding moves the counter before it finishes
    assert watch.observe_window(vllm(gen=1, requests=0, running=1), vllm(gen=40, requests=0, running=1),
                                10.0)["state"] == "busy"


def scrape_file(name):
    return metrics.parse((ROOT / "tests" / "data" / name).read_text())


def test_a_vllm_stream_at_60_tok_s_and_accept_length_3_reads_60():
    """Held out: vLLM 0.33's /metrics as prometheus_client writes it (tests/data, made with vLLM's
    own metric definitions and buckets) around a 10 s window of one MTP request streaming 600
    tokens in 200 verify steps of 0.05 s. Its histogram counted 200 steps, not 600 tokens."""
    obs = watch.observe_window(scrape_file("vllm-0.33-mtp-stream-before.prom"),
                               scrape_file("vllm-0.33-mtp-stream-after.prom"), 10.0)
    assert (obs["state"], obs["engine"], obs["running"], obs["requests"]) == ("busy", "vllm", 1.0, 0.0)
    assert obs["decode_tok_s"] == pytest.approx(60.0, rel=0.10)
    assert obs["accept_len"] == pytest.approx(3.0) and obs["generation_tok_s"] == pytest.approx(60.0)


@pytest.mark.parametrize("steps", [1, 6, 1024, 100000])
@pytest.mark.parametrize("accepted_share", [0.0, 1.0, 2.0, 2.75])
def test_vllm_decode_is_its_tokens_per_step_over_its_step_time(steps, accepted_share):
    """From one verify step to 100,000 in the window: tokens a step (1 + accepted / drafts) over
    the mean step time (0.05 s)."""
    accepted = round(accepted_share * steps)
    before = vllm(gen=30000, drafts=4000, accepted=9000, requests=20, running=1, itl=(200.0, 4000))
    after = vllm(gen=30000 + steps + accepted, drafts=4000 + steps, accepted=9000 + accepted, requests=20,
                 running=1, itl=(200.0 + 0.05 * steps, 4000 + steps))
    obs = watch.observe_window(before, after, 10.0)
    assert obs["state"] == "busy" and obs["decode_tok_s"] == pytest.approx((1 + accepted / steps) * 20)


@pytest.mark.parametrize("steps", [1, 6, 1024, 100000])
def test_vllm_without_speculation_has_one_token_a_step(steps):
    """No drafts counter (vLLM without a speculative config serves none): a step is one token."""
    obs = watch.observe_window(
        vllm(gen=500, requests=3, itl=(10.0, 497)),
        vllm(gen=500 + steps, requests=3, itl=(10.0 + 0.025 * steps, 497 + steps)), 10.0)
    assert (obs["state"], obs["accept_len"]) == ("busy", None)
    assert obs["decode_tok_s"] == pytest.approx(40.0)


def test_sglang_counts_each_token_whatever_its_verify_steps():
    """SGLang's histogram observes every token (a chunk's interval over its tokens): its count over
    its sum is the speed, the verify steps do not multiply it."""
    obs = watch.observe_window(sglang(gen=500, verify=160, requests=3, running=1, itl=(10.0, 560)),
                               sglang(gen=800, verify=260, requests=4, running=1, itl=(15.0, 860)), 5.0)
    assert obs["accept_len"] == pytest.approx(3.0) and obs["decode_tok_s"] == pytest.approx(60.0)


@pytest.mark.parametrize("finished, seconds, decode", [
    (1, 0.02, 50.0), (6, 6 * 0.025, 40.0), (1024, 1024 * 0.02, 50.0),
    (3, 0.0, None),  # 1-token requests: vLLM observes 0, no speed
])
def test_a_vllm_window_without_its_inter_token_latency_reads_its_finished_requests(finished, seconds, decode):
    """No step counted (a vLLM without the inter-token latency histogram): the time per output
    token of the requests that finished in the window."""
    obs = watch.observe_window(vllm(gen=900, requests=10, tpot=(0.2, 10)),
                               vllm(gen=900 + 40 * finished, requests=10 + finished,
                                    tpot=(0.2 + seconds, 10 + finished)), 10.0)
    assert obs["state"] == "busy"
    assert obs["decode_tok_s"] == (None if decode is None else pytest.approx(decode))


@pytest.mark.parametrize("before, after", [
    (vllm(gen=900, drafts=300, accepted=600, itl=(15.0, 300)),
     vllm(gen=960, drafts=320, accepted=5, itl=(16.0, 320))),
    (vllm(gen=900, requests=10, tpot=(0.2, 10)), vllm(gen=960, requests=11, tpot=(0.02, 1))),
])
def test_vllm_acceptance_or_time_per_token_going_back_is_a_restart(before, after):
    assert watch.observe_window(before, after, 10.0)["state"] == "restarted"


def test_the_probe_gives_its_per_request_median_and_accept_length():
    result = {"decode_tok_s": {"median": 57.5}, "accept_len": 3.2, "aggregate_tok_s": 41.0, "requests": 3,
              "server": {"kind": "sglang"}}
    assert figures(watch.observe_probe(result)) == {
        "state": "idle", "up": 1, "source": "probe", "accept_len": 3.2, "decode_tok_s": 57.5,
        "generation_tok_s": 41.0, "running": 1, "requests": 3}
    no_spec = watch.observe_probe(dict(result, accept_len=None))
    assert no_spec["accept_len"] is None and no_spec["decode_tok_s"] == 57.5
    # the engine's own window over the probe counted other tokens: not a C=1 figure
    note = "server generated 480 tokens in the window, the benchmark received 288"
    beside = watch.observe_probe(dict(result, metrics={"matches_client": False, "note": note}))
    assert beside["running"] is None and beside["decode_tok_s"] == 57.5
    assert beside["note"] == "not at C=1: " + note
    assert "sglang_watch_running_requests" not in families(watch.render(SETTINGS, beside, 1.0))
    assert watch.observe_probe(dict(result, metrics={"matches_client": True}))["running"] == 1
    failed = watch.probe_failed("all 3 measured requests failed (3 x http_500)")
    assert (failed["up"], failed["source"]) == (0, "none") and "http_500" in failed["note"]


def families(text):
    """{family: {(labels...): value}} of a textfile, read with prometheus_client's own parser."""
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge" and fam.name not in out
        out[fam.name] = {frozenset(s.labels.items()): s.value for s in fam.samples}
    return out


LABELS = frozenset(SETTINGS["labels"].items())


def test_the_textfile_of_a_busy_window():
    obs = watch.observe_window(sglang(gen=1000, verify=320, requests=10, running=1, itl=(20.0, 1100)),
                               sglang(gen=1600, verify=500, requests=14, running=2, itl=(30.0, 1650)), 10.0)
    fams = families(watch.render(SETTINGS, obs, 1796000000.5))
    # every family has its series here but the bar: two streams ran, not judged
    assert set(fams) == set(watch.WATCH_METRICS) - {"sglang_watch_decode_bar_tokens_per_second",
                                                    "sglang_watch_thinking_decode_tokens_per_second",
                                                    "sglang_watch_thinking_accept_length",
                                                    "sglang_watch_answer_right"}  # no probe
    assert fams["sglang_watch_deploying"] == {LABELS: 0}
    assert fams["sglang_watch_up"] == {LABELS: 1}
    assert fams["sglang_watch_accept_length"][LABELS] == pytest.approx(600 / 180)
    assert fams["sglang_watch_decode_tokens_per_second"][LABELS] == pytest.approx(55.0)
    assert fams["sglang_watch_decode_threshold_tokens_per_second"] == {LABELS: 45}
    assert fams["sglang_watch_last_run_timestamp_seconds"] == {LABELS: 1796000000.5}
    assert fams["sglang_watch_interval_seconds"] == {LABELS: 900}
    assert {dict(k)["source"]: v for k, v in fams["sglang_watch_source"].items()} == {
        "metrics": 1, "probe": 0, "none": 0}


def test_the_textfile_of_a_down_server_has_up_0_and_no_figure():
    down = watch.observe_window(None, None, 0)
    fams = families(watch.render(dict(SETTINGS, decode_threshold=None), down, 5.0))
    assert set(fams) == {"sglang_watch_up", "sglang_watch_source", "sglang_watch_interval_seconds",
                         "sglang_watch_last_run_timestamp_seconds", "sglang_watch_deploying"}
    assert fams["sglang_watch_up"] == {LABELS: 0}
    assert {dict(k)["source"]: v for k, v in fams["sglang_watch_source"].items()} == {
        "metrics": 0, "probe": 0, "none": 1}


def test_the_journal_line_says_the_state_and_the_figures():
    obs = watch.observe_probe({"decode_tok_s": {"median": 57.54}, "accept_len": 3.21, "aggregate_tok_s": 41.0,
                               "requests": 3, "server": {"kind": "sglang"}})
    assert watch.summary(obs) == ("up 1, idle (source probe); accept length 3.21, decode 57.5 tok/s, "
                                  "generation 41.0 tok/s, 1 running, 3 requests")
    assert watch.summary(watch.observe_window(None, None, 0)) == (
        "up 0, down (source none); the server did not answer GET /metrics")


@pytest.mark.parametrize("text, seconds", [
    ("15min", 900), ("900", 900), ("1h 30min", 5400), ("1.5h", 5400), ("2d", 172800), (" 45s ", 45),
    ("1w", 604800), ("1min30s", 90)])
def test_interval_as_systemd_reads_it(text, seconds):
    assert watch.interval_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "15 minutes later", "5M", "-1min", "1min,", None])
def test_intervals_systemd_would_read_otherwise_are_refused(text):
    with pytest.raises(ValueError):
        watch.interval_seconds(text)


def inputs(**changes):
    """The role's defaults as configure() reads them (watch.INPUTS, as the deploy plan passes them)."""
    defaults = role_defaults("sglang_watch")
    return dict({k: v for k, v in defaults.items() if k != "sglang_watch_enabled"}, **changes)


@pytest.fixture(scope="module")
def production_plan():
    """The local host's plan with the production gate plan (coding: 192 tokens, min_tok_s 45)."""
    return plan_for(plumbing=False)


def test_the_role_defaults_make_the_settings_from_the_deploy_plan(production_plan):
    settings, problems = watch.configure(production_plan, inputs())
    assert problems == []
    assert settings == {
        "url": "http://127.0.0.1:30000", "model": "Qwen3.6-27B",
        "labels": {"profile": "nextn_3step", "release": production_plan["release"]["name"],
                   "engine": "sglang"},
        "api_key_file": None, "textfile": "/var/lib/prometheus/node-exporter/sglang_watch.prom",
        "window_s": 10.0, "timeout_s": 300.0, "interval_s": 900.0,
        "probe": {"case": "coding", "prompts": "coding", "requests": 3, "max_tokens": 192, "thinking": False},
        # auto: the plan's thinking case, after the watched one, as many requests
        "thinking_probe": {"case": "thinking", "prompts": "coding", "requests": 3, "max_tokens": 96,
                           "thinking": True},
        "decode_threshold": 45,
        # the long-context case's 33 tok/s at 32K: the slowest one stream the gate judges
        "passive": {"min_tok_s": 33, "max_prompt_tokens": 32768},
        "deploy_lock": {"path": "/var/lib/sglang/deploy.lock", "max_age_s": 21600},
        "measure_lock": "/var/lib/sglang/measure.lock"}
    assert json.loads(json.dumps(settings)) == settings  # the role writes it as JSON


def test_with_an_api_key_the_settings_name_its_file_not_the_key():
    key = "k3y-" + "x" * 28
    plan = plan_for({"sglang_api_key": key})
    settings, problems = watch.configure(plan, inputs())
    assert problems == []
    assert settings["api_key_file"] == plan["server"]["secrets_path"] == "/etc/sglang/sglang-secrets.yaml"
    assert key not in json.dumps(settings)


def test_a_case_without_a_decode_threshold_leaves_it_out(production_plan):
    plan = json.loads(json.dumps(production_plan))
    plan["gate"]["cases"][0]["thresholds"].pop("min_tok_s")
    settings, _ = watch.configure(plan, inputs())
    assert settings["decode_threshold"] is None


@pytest.mark.parametrize("changes, words", [
    ({"sglang_watch_interval": "soon"}, "sglang_watch_interval = soon is not valid: not a systemd time span"),
    ({"sglang_watch_interval": "30s"}, "sglang_watch_interval = 30s is not valid: at least 60s"),
    ({"sglang_watch_window": 0}, "sglang_watch_window = 0 is not valid: seconds between the two scrapes"),
    ({"sglang_watch_window": "10"}, "sglang_watch_window = 10 is not valid"),
    ({"sglang_watch_window": 601}, "at most 600"),
    ({"sglang_watch_window": 100, "sglang_watch_timeout": 120},
     "sglang_watch_timeout = 120 is not valid: seconds for one run, at least sglang_watch_window + 30"),
    ({"sglang_watch_probe_requests": 0},
     "sglang_watch_probe_requests = 0 is not valid: requests from 1 to 20"),
    ({"sglang_watch_probe_requests": 21}, "sglang_watch_probe_requests = 21 is not valid"),
    ({"sglang_watch_probe_requests": True}, "sglang_watch_probe_requests = True is not valid"),
    ({"sglang_watch_textfile_path": "watch.prom"},
     "sglang_watch_textfile_path = watch.prom is not valid: not an absolute path"),
    ({"sglang_watch_textfile_path": "/var/lib/x/watch.txt"}, "reads only files named *.prom"),
    ({"sglang_watch_textfile_path": ""},
     "sglang_watch_textfile_path =  is not valid: an absolute path ending in"),
    ({"sglang_watch_case": "nope"}, "sglang_watch_case = nope is not valid: a case of the gate plan "
                                    "(sglang_gate_plan: coding, concurrent, long_context, prose, thinking)"),
    ({"sglang_watch_case": "long_context"}, "long_context is a long-context case: name a coding case"),
    ({"sglang_watch_thinking_case": "coding"},
     "sglang_watch_thinking_case = coding is not valid: auto, '' or a case of the gate plan with thinking: "
     "true (thinking)"),
])
def test_each_bad_input_is_refused_naming_its_variable(production_plan, changes, words):
    settings, problems = watch.configure(production_plan, inputs(**changes))
    assert settings is None and len(problems) == 1 and words in problems[0], problems
    # the deploy plan refuses it with the host's other problems, naming the variable, before
    # anything changes (its argument spec first makes a string "10" the 10.0 s -e gives)
    planned = plan_for(dict(changes, sglang_watch_enabled=True), roles=deploy_plan.ROLES, plumbing=False)
    variable = problems[0].split(" = ")[0]
    refused = [p for p in planned["problems"] if p.startswith(variable + " = ")]
    if isinstance(changes.get("sglang_watch_window"), str):
        assert refused == [], planned["problems"]
    else:
        assert len(refused) == 1, planned["problems"]


def test_the_thinking_probe_is_off_without_a_thinking_case_or_when_asked(production_plan):
    assert watch.configure(plan_for(), inputs())[0]["thinking_probe"] is None  # plumbing plan: coding only
    off = watch.configure(production_plan, inputs(sglang_watch_thinking_case=""))[0]
    assert off["thinking_probe"] is None
    named = watch.configure(production_plan, inputs(sglang_watch_thinking_case="thinking"))[0]
    assert named["thinking_probe"]["case"] == "thinking"


def test_the_thinking_probes_figures_are_written_beside_the_watched_cases():
    obs = watch.observe_probe({"decode_tok_s": {"median": 57.5}, "accept_len": 3.2, "requests": 3,
                               "server": {"kind": "sglang"}})
    obs.update(thinking_decode_tok_s=49.0, thinking_accept_len=2.7)
    fams = families(watch.render(SETTINGS, obs, 1.0))
    assert list(fams["sglang_watch_thinking_decode_tokens_per_second"].values()) == [49.0]
    assert list(fams["sglang_watch_thinking_accept_length"].values()) == [2.7]
    assert watch.summary(obs).endswith("thinking: decode 49.0 tok/s, thinking: accept length 2.70")
    # a run that sent none writes none
    assert "sglang_watch_thinking_accept_length" not in families(watch.render(SETTINGS, dict(
        obs, thinking_decode_tok_s=None, thinking_accept_len=None), 1.0))


def test_a_plan_without_the_gate_is_refused():
    plan = plan_for(roles=("nvidia_gpu", "sglang"))
    assert watch.configure(plan, inputs())[1] == [
        "sglang_deploy_plan has no gate: plan the sglang_gate role's inputs too "
        "(sglang_deploy_plan: roles: [sglang, sglang_gate])"]


@pytest.mark.parametrize("key", ["abcdefghijklmnop1234", "1234567890123456", "@abcdefghijklmnop",
                                 "-abcdefghijklmnop", "true-but-longer-0000", "a#bcdefghijklmnop",
                                 "%abcdefghijklmno", "a:bcdefghijklmnop", "x" * 200, "\u00e9" * 20])
def test_the_api_key_is_read_back_from_the_config_file_the_sglang_role_writes(key):
    """roles/sglang/tasks/service.yml writes {'api-key': key} | to_nice_yaml (PyYAML quotes what
    would not read back as the string)."""
    text = yaml.safe_dump({"api-key": key}, default_flow_style=False, allow_unicode=True, indent=4)
    assert watch.api_key(text) == key


def test_a_config_file_the_watch_cannot_read_is_refused_without_its_value():
    assert watch.api_key("other: 1\n") is None
    for text in ("api-key: |\n  secretsecretsecret\n", 'api-key: "sec\\tretsecretsecret"\n'):
        with pytest.raises(ValueError) as e:
            watch.api_key(text)
        assert "secret" not in str(e.value)


def test_the_program_holds_exactly_the_modules_the_watch_imports():
    """The one file the role installs: every package module watch.py imports, directly or not, as
    a fresh interpreter imports them - no more, no less."""
    p = subprocess.run([sys.executable, "-c", "import sys, sglang_perf.host.watch; print(' '.join(sorted("
                        "m.split('.', 1)[1] for m in sys.modules if m.startswith('sglang_perf.'))))"],
                       capture_output=True, text=True, check=True)
    assert flt.closure() == p.stdout.split()
    assert "host.watch" in flt.closure()
    assert "plan.deploy" not in flt.closure() and "plan.gate" not in flt.closure()
    text = flt.sglang_watch_program("/usr/bin/python3")
    assert text.startswith("#!/usr/bin/python3 -I\n") and text == flt.sglang_watch_program("/usr/bin/python3")
    namespace = {}
    exec(text.split("SOURCES = ", 1)[1].split("\n\n", 1)[0].join(("SOURCES = ", "")), namespace)
    assert sorted(namespace["SOURCES"]) == ["sglang_perf"] + ["sglang_perf." + m for m in flt.closure()]
    source_dir = ROOT / "plugins" / "module_utils" / "sglang_perf"
    assert namespace["SOURCES"]["sglang_perf.host.watch"] == (source_dir / "host" / "watch.py").read_text()
    with pytest.raises(Exception, match="absolute path"):
        flt.sglang_watch_program("python3")


def test_the_program_carries_the_corpus_loader_not_the_corpus_and_never_needs_it(tmp_path):
    """measure/corpus.py is in the closure (prompts.py imports it), its data (corpus.json) is not
    in the file: the probe sends short prompts only - configure() refuses a long-context case and
    load_settings() a settings file that has one - so the loader is never called (bundled, without
    a __file__, it has no file to read and would raise: tests/test_watch_emulator.py's probes run
    that program)."""
    from sglang_perf.measure import corpus, prompts
    assert "measure.corpus" in flt.closure()
    text = flt.sglang_watch_program("/usr/bin/python3")
    namespace = {}
    exec(text.split("SOURCES = ", 1)[1].split("\n\n", 1)[0].join(("SOURCES = ", "")), namespace)
    source_dir = ROOT / "plugins" / "module_utils" / "sglang_perf"
    loader = (source_dir / "measure" / "corpus.py").read_text()
    assert namespace["SOURCES"]["sglang_perf.measure.corpus"] == loader
    bundled = {"__name__": "sglang_perf.measure.corpus"}
    exec(compile(loader, "sglang-watch/sglang_perf/measure/corpus.py", "exec"), bundled)
    assert bundled["DEFAULT_PATH"] is None and bundled["path"]() is None
    with pytest.raises(bundled["CorpusError"], match="the long-context corpus has no file here"):
        bundled["documents"]()
    lines = [line for _, doc in corpus.documents() for line in doc.splitlines() if len(line) >= 40]
    assert lines and not [line for line in lines if repr(line)[1:-1] in text]
    assert watch.PROBE_PROMPTS == ("coding", "prose") and "long_context" in prompts.PROMPT_SOURCES
    settings = dict(SETTINGS, url="http://127.0.0.1:9", textfile=str(tmp_path / "w.prom"), window_s=1,
                    timeout_s=60, probe={"case": "coding", "prompts": "coding", "requests": 1})
    path = tmp_path / "settings.json"
    for change in ({}, {"probe": dict(settings["probe"], prompts=None)},
                   {"thinking_probe": dict(settings["probe"], prompts="prose", thinking=True)}):
        path.write_text(json.dumps(dict(settings, **change)))
        assert watch.load_settings(str(path))
    for key in ("probe", "thinking_probe"):
        path.write_text(json.dumps(dict(settings, **{key: dict(settings["probe"], prompts="long_context")})))
        with pytest.raises(ValueError, match=r"settings.json: %s.prompts must be one of coding, prose "
                           r"\(a probe sends a few short requests\), got 'long_context'" % key):
            watch.load_settings(str(path))


def test_the_entry_point_refuses_what_it_cannot_use_and_says_what(tmp_path, capsys):
    """Exit 2 for settings it cannot use, 1 for a textfile it cannot write; a server that does not
    answer is not among them (tests/test_watch_emulator.py)."""
    assert watch.main([]) == 2 and "usage: sglang-watch SETTINGS.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert watch.main([str(bad)]) == 2 and "bad.json: not JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"url": "http://127.0.0.1:1"}))
    assert watch.main([str(bad)]) == 2
    assert "bad.json: missing labels, textfile, window_s, timeout_s, probe" in capsys.readouterr().err
    settings = dict(SETTINGS, url="http://127.0.0.1:9", textfile=str(tmp_path / "no-such-dir" / "w.prom"),
                    window_s=1, timeout_s=60, probe={"case": "coding", "prompts": "coding", "requests": 1,
                                                     "max_tokens": 32},
                    api_key_file=str(tmp_path / "missing-secrets.yaml"))
    good = tmp_path / "settings.json"
    good.write_text(json.dumps(settings))
    assert watch.main([str(good)]) == 2 and "missing-secrets.yaml" in capsys.readouterr().err
    good.write_text(json.dumps(dict(settings, api_key_file=None)))
    assert watch.main([str(good)]) == 1  # the server on port 9 does not answer: up 0, but no directory
    assert "cannot write %s" % settings["textfile"] in capsys.readouterr().err
    good.write_text(json.dumps(dict(settings, api_key_file=None, textfile=str(tmp_path / "w.prom"))))
    assert watch.main([str(good)]) == 0 and "up 0, down" in capsys.readouterr().out
    assert families((tmp_path / "w.prom").read_text())["sglang_watch_up"] == {LABELS: 0}
