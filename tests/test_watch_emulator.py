"""The watch's program as the role installs it (one file, run by the host's system Python in
isolated mode: the standard library only) against the emulator: an idle server is probed, a
server with traffic flowing is not (the emulator's own request list tells), a server that does not
answer is written as up 0 and the run still succeeds, the API key is read from the server's
--config file and never shown, and vLLM's names work the same way."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.launch import EmulatorProcess
from conftest import free_port, role_defaults
from planutil import plan_for
from plugins.filter.sglang_watch_program import sglang_watch_program
from sglang_perf.host import watch
from test_watch import families

pytestmark = pytest.mark.timeout(120)

# The host's Python the unit runs the program with (Debian's; the deploy plan's sglang_python).
HOST_PYTHON = "/usr/bin/python3"
METRICS = ["--enable-metrics"]
# Where a test checks no speed: the emulator 20 times faster, without its first requests' slowness.
FAST = {"SGLEMU_SPEED_SCALE": "20", "SGLEMU_WARMUP_REQUESTS": "0"}


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    path = tmp_path_factory.mktemp("watch") / "sglang-watch"
    path.write_text(sglang_watch_program(HOST_PYTHON))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def plan():
    return plan_for()  # the local host, the plumbing gate plan: coding, 96 tokens, min_tok_s 45


def settings_file(tmp_path, plan, url, **changes):
    """The settings the role writes (configure() of the plan and the role's defaults), pointed at
    ``url`` and a textfile in tmp_path, with a 1 s window."""
    inputs = {k: v for k, v in role_defaults("sglang_watch").items() if k != "sglang_watch_enabled"}
    inputs.update(sglang_watch_window=1, sglang_watch_textfile_path=str(tmp_path / "sglang_watch.prom"))
    settings, problems = watch.configure(plan, inputs)
    assert problems == []
    # the host's locks in tmp_path/state: the deploy lock absent, the measurement lock's file there
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "measure.lock").touch()
    settings.update(url=url, deploy_lock={"path": str(state / "deploy.lock"), "max_age_s": 21600},
                    measure_lock=str(state / "measure.lock"))
    settings.update(**changes)
    path = tmp_path / "sglang-watch.json"
    path.write_text(json.dumps(settings))
    return path, settings


def run(program, settings_path):
    p = subprocess.run([str(program), str(settings_path)], capture_output=True, text=True, timeout=90,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def sources(fams):
    return {dict(k)["source"]: v for k, v in fams["sglang_watch_source"].items()}


def generation_requests(emu, prefix):
    return [r for r in emu.stats()["requests"] if not r["health"] and r["rid"].startswith(prefix)]


def test_an_idle_server_is_probed_at_c1_with_the_gate_cases_prompts(emulator, program, plan, tmp_path):
    emu = emulator("nextn_3step", extra=METRICS, env={"SGLEMU_WARMUP_REQUESTS": "0"})  # warm long ago
    path, settings = settings_file(tmp_path, plan, emu.url)
    p = run(program, path)
    assert p.stdout.startswith("sglang-watch: up 1, idle (source probe); accept length "), p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    labels = frozenset({"profile": "nextn_3step", "release": plan["release"]["name"],
                        "engine": "sglang"}.items())
    assert fams["sglang_watch_up"] == {labels: 1} and sources(fams)["probe"] == 1
    assert 2.8 < fams["sglang_watch_accept_length"][labels] < 4.0          # the 3-step profile's reach
    assert fams["sglang_watch_decode_tokens_per_second"][labels] > 45      # above the gate's bar
    assert fams["sglang_watch_decode_threshold_tokens_per_second"] == {labels: 45}
    assert fams["sglang_watch_running_requests"] == {labels: 1}
    # what the emulator served: one warmup and the probe's 3 requests, 96 tokens each, one at a
    # time, then one known answer of the gate's built-in set (right: the series says 1)
    probe = generation_requests(emu, "bench-")
    assert len(probe) == 4 and len([r for r in emu.stats()["requests"] if not r["health"]]) == 5
    assert fams["sglang_watch_answer_right"] == {labels: 1} and "known answer right" in p.stdout
    assert sorted(r["completion_tokens"] for r in probe) == [32, 96, 96, 96]
    assert all(a["t_finish"] <= b["t_arrival"] for a, b in zip(probe, probe[1:]))
    assert (tmp_path / "sglang_watch.prom").stat().st_mode & 0o777 == 0o644
    assert sorted(q.name for q in tmp_path.iterdir()) == ["sglang-watch.json", "sglang_watch.prom", "state"]


def test_the_probe_sends_the_thinking_case_after_the_watched_one(emulator, program, tmp_path):
    """With the production gate plan (its report-only `thinking` case: coding prompts, thinking on)
    the probe sends the coding case thinking off, then as many requests thinking on, and writes
    their figures beside the watched case's, unjudged."""
    emu = emulator("nextn_3step", extra=METRICS, env={"SGLEMU_WARMUP_REQUESTS": "0"})
    path, settings = settings_file(tmp_path, plan_for(plumbing=False), emu.url)
    assert settings["thinking_probe"] == {"case": "thinking", "prompts": "coding", "requests": 3,
                                          "max_tokens": 96, "thinking": True}
    p = run(program, path)
    assert ", thinking: decode " in p.stdout and ", thinking: accept length " in p.stdout, p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    (coding,) = fams["sglang_watch_accept_length"].values()
    (thinking,) = fams["sglang_watch_thinking_accept_length"].values()
    (decode,) = fams["sglang_watch_thinking_decode_tokens_per_second"].values()
    # the emulator's calibration with thinking on (3 requests: within half a token of it)
    expected = emu.stats()["configured"]["expected_accept_length_thinking"]
    assert abs(thinking - expected) < 0.5, (coding, thinking, expected)
    assert decode > 0 and coding > 2.8
    # one warmup and 3 requests a case, one at a time
    assert len(generation_requests(emu, "bench-")) == 8


class Traffic(object):
    """Users: ``streams`` loops of chat requests (rid traffic-N) until stopped."""

    def __init__(self, url, streams=2, max_tokens=64):
        self.url, self.max_tokens, self.stop, self.sent = url, max_tokens, threading.Event(), 0
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.loop, daemon=True) for _ in range(streams)]

    def loop(self):
        while not self.stop.is_set():
            with self.lock:
                self.sent += 1
                rid = "traffic-%d" % self.sent
            body = {"model": "Qwen3.6-27B", "max_tokens": self.max_tokens, "ignore_eos": True, "rid": rid,
                    "messages": [{"role": "user", "content": "Write a Python function that merges two sorted "
                                                             "lists, with tests."}]}
            req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                r.read()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(60)


def test_traffic_flowing_gives_the_figures_from_the_counters_and_no_probe(emulator, program, plan, tmp_path):
    emu = emulator("nextn_3step", extra=METRICS, env={"SGLEMU_WARMUP_REQUESTS": "0"})  # warm long ago
    path, _ = settings_file(tmp_path, plan, emu.url, window_s=2)
    with Traffic(emu.url):
        deadline = time.monotonic() + 20
        while not emu.stats()["totals"]["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        p = run(program, path)
    assert "busy (source metrics)" in p.stdout, p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    assert sources(fams)["metrics"] == 1
    (running,) = fams["sglang_watch_running_requests"].values()
    (decode,) = fams["sglang_watch_decode_tokens_per_second"].values()  # the emulator's inter-token latency
    assert running >= 1 and 30 < decode < 90
    # nothing but the users' requests reached the server: the watch sent none
    served = [r for r in emu.stats()["requests"] if not r["health"]]
    assert served and all(r["rid"].startswith("traffic-") for r in served)
    assert generation_requests(emu, "bench-") == []


def test_a_server_that_does_not_answer_is_up_0_and_the_run_succeeds(program, plan, tmp_path):
    path, _ = settings_file(tmp_path, plan, "http://127.0.0.1:%d" % free_port())
    t = time.monotonic()
    p = run(program, path)
    assert time.monotonic() - t < 10 and "up 0, down" in p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    (up,) = fams["sglang_watch_up"].values()
    assert up == 0 and sources(fams)["none"] == 1 and "sglang_watch_decode_tokens_per_second" not in fams


def test_the_api_key_comes_from_the_servers_config_file_and_is_never_shown(emulator, program, plan, tmp_path):
    key = "watch-" + os.urandom(12).hex()
    emu = emulator("nextn_3step", extra=METRICS + ["--api-key", key], env=FAST)
    config = tmp_path / "sglang-secrets.yaml"
    # as roles/sglang writes it ({'api-key': key} | to_nice_yaml)
    config.write_text(yaml.safe_dump({"api-key": key}, default_flow_style=False, indent=4))
    path, settings = settings_file(tmp_path, plan, emu.url, api_key_file=str(config))
    p = run(program, path)
    assert "up 1, idle (source probe)" in p.stdout, p.stdout + p.stderr
    shown = p.stdout + p.stderr + (tmp_path / "sglang_watch.prom").read_text() + path.read_text()
    assert key not in shown
    # the wrong key: the probe is refused, the server written as not serving (up 0), never the key
    wrong = "wrong-" + os.urandom(12).hex()
    config.write_text("api-key: %s\n" % wrong)
    p = run(program, path)
    assert "up 0, idle (source none)" in p.stdout and "authentication failed" in p.stdout, p.stdout
    assert wrong not in p.stdout + p.stderr + (tmp_path / "sglang_watch.prom").read_text()


VLLM_ARGS = ["serve", "/models/Qwen3.6-27B", "--served-model-name", "Qwen3.6-27B",
             "--tensor-parallel-size", "2", "--max-model-len", "131072", "--max-num-seqs", "8",
             "--speculative-config", '{"method": "mtp", "num_speculative_tokens": 3}',
             "--per-request-spec-decode-metrics", "summary", "--trust-remote-code"]


@pytest.fixture
def vllm_emulator(tmp_path):
    log = open(tmp_path / "vllm.log", "w+")
    emu = EmulatorProcess(VLLM_ARGS, log, env=dict(FAST, SGLEMU_SEED="0"), module="emulator.vllm")
    try:
        emu.wait_ready("/health", 30)
    except RuntimeError:
        log.seek(0)
        raise AssertionError(log.read())
    yield emu
    emu.stop()
    log.close()


def test_vllm_idle_then_busy_under_its_own_names(vllm_emulator, program, tmp_path):
    plan = plan_for({"sglang_profile": "vllm_mtp_3"})
    assert (plan["problems"], plan["release"]["engine"]) == ([], "vllm")
    path, settings = settings_file(tmp_path, plan, vllm_emulator.url)
    assert settings["labels"] == {"profile": "vllm_mtp_3", "release": plan["release"]["name"],
                                  "engine": "vllm"}
    p = run(program, path)
    assert "up 1, idle (source probe); accept length " in p.stdout, p.stdout + p.stderr
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    (accept,) = fams["sglang_watch_accept_length"].values()
    assert 1.5 < accept < 4.0
    with Traffic(vllm_emulator.url):
        time.sleep(1.0)
        p = run(program, path)
    assert "busy (source metrics); accept length " in p.stdout, p.stdout  # vLLM counts per engine step
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    (generation,) = fams["sglang_watch_generation_tokens_per_second"].values()
    assert sources(fams)["metrics"] == 1 and generation > 10


# vLLM 0.33's INTER_TOKEN_LATENCY_BUCKETS (v1/metrics/buckets.py): its inter-token latency and
# time per output token histograms'.
VLLM_ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                    10.0, 20.0, 40.0, 80.0]
# accept length -> (speculative tokens, the emulator's acceptance per draft position): 1 without
# speculation; 2 from one draft always accepted; 3 from three drafts each kept with p = 0.81, as a
# real MTP head varies (1 + 0.81 + 0.81^2 + 0.81^3 = 3.0).
ACCEPT_LENGTHS = {1: (0, None), 2: (1, "1.0"), 3: (3, "0.81")}


class StreamingUser(Traffic):
    """One user streaming completions back to back (C=1), timing each request's text as it arrives:
    ``decoded`` holds each request's (tokens after the first, seconds from first to last token)."""

    def __init__(self, url, max_tokens=96):
        super().__init__(url, streams=1, max_tokens=max_tokens)
        self.decoded = []

    def decode_tok_s(self):
        """The user's decode speed over all its requests (tok/s after each one's first token)."""
        return sum(t for t, _ in self.decoded) / sum(s for _, s in self.decoded)

    def loop(self):
        body = {"model": "Qwen3.6-27B", "prompt": "def merge_sorted(a, b):", "max_tokens": self.max_tokens,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        while not self.stop.is_set():
            req = urllib.request.Request(self.url + "/v1/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            first = last = tokens = None
            with urllib.request.urlopen(req, timeout=60) as r:
                for line in r:
                    if not line.startswith(b"data: {"):
                        continue
                    now, chunk = time.monotonic(), json.loads(line[6:])
                    if chunk.get("usage"):
                        tokens = chunk["usage"]["completion_tokens"]
                    if any(c.get("text") for c in chunk.get("choices") or []):
                        first, last = first or now, now
            self.decoded.append((tokens - 1, last - first))


def histogram(text, name):
    """{"_count": n, "_sum": s, "_bucket<le>": n...} of one histogram in a /metrics text."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith(name + "_"):
                out[s.name[len(name):] + s.labels.get("le", "")] = s.value
    return out


@pytest.mark.parametrize("accept_len", sorted(ACCEPT_LENGTHS))
def test_vllm_decode_is_read_as_vllm_counts_it_at_accept_lengths_1_2_3(program, tmp_path, accept_len):
    """The watch's decode figure over a window of one user streaming from the vLLM emulator is the
    decode speed the user measured (within 10%): vLLM's inter-token latency counts engine steps,
    a step's tokens come from its spec-decode counters. The emulator counts as vLLM 0.33 does: one
    latency per step of a request, one time per output token per finished request."""
    steps, probs = ACCEPT_LENGTHS[accept_len]
    args = list(VLLM_ARGS[:VLLM_ARGS.index("--speculative-config")]) + ["--trust-remote-code"]
    if steps:
        args += ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": steps})]
    env = {"SGLEMU_SPEED_SCALE": "4", "SGLEMU_WARMUP_REQUESTS": "0", "SGLEMU_SEED": "3",
           "SGLEMU_LONGCTX_FACTOR_32K": "1"}
    if probs:
        env["SGLEMU_VLLM_ACCEPT_PROBS"] = probs
    log = open(tmp_path / "vllm.log", "w+")
    emu = EmulatorProcess(args, log, env=env, module="emulator.vllm")
    try:
        emu.wait_ready("/health", 30)
        path, _ = settings_file(tmp_path, plan_for({"sglang_profile": "vllm_mtp_3"}), emu.url, window_s=3)
        with StreamingUser(emu.url) as user:
            while not user.decoded:
                time.sleep(0.05)
            p = run(program, path)
        with urllib.request.urlopen(emu.url + "/metrics", timeout=10) as r:
            text = r.read().decode()
        with urllib.request.urlopen(emu.url + "/_emulator/stats", timeout=10) as r:
            served = [q for q in json.loads(r.read())["requests"] if not q["health"]]
    finally:
        emu.stop()
        log.close()
    assert "busy (source metrics)" in p.stdout, p.stdout + p.stderr
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    (decode,) = fams["sglang_watch_decode_tokens_per_second"].values()
    assert decode == pytest.approx(user.decode_tok_s(), rel=0.10), (decode, user.decoded)
    if steps:
        (accept,) = fams["sglang_watch_accept_length"].values()
        assert accept == pytest.approx(accept_len, rel=0.10)
    else:
        assert "sglang_watch_accept_length" not in fams
    # the emulator's exact counters: one latency per step after a request's first token (its
    # verify steps with speculation, a token a step without), summing to its decode time
    finished = [q for q in served if q["t_finish"] is not None]
    itl = histogram(text, "vllm:inter_token_latency_seconds")
    assert itl["_count"] == sum(q["verify_ct"] if steps else q["completion_tokens"] - 1 for q in served)
    assert itl["_sum"] == pytest.approx(sum(q["t_last_token"] - q["t_first_token"] for q in served))
    assert [float(le) for le in (k[len("_bucket"):] for k in itl if k.startswith("_bucket"))] \
        == VLLM_ITL_BUCKETS + [float("inf")]
    tpot = histogram(text, "vllm:request_time_per_output_token_seconds")
    assert tpot["_count"] == len(finished) and tpot["_bucket+Inf"] == len(finished)
    assert tpot["_sum"] == pytest.approx(sum((q["t_last_token"] - q["t_first_token"])
                                             / (q["completion_tokens"] - 1) for q in finished))
    # the prompts of finished requests, once each (the watch's mean prompt of a vLLM window)
    prompts = histogram(text, "vllm:request_prompt_tokens")
    assert (prompts["_count"], prompts["_sum"]) == (len(finished), sum(q["prompt_tokens"] for q in finished))


def test_a_wrong_known_answer_is_written_down_and_named(emulator, program, plan, tmp_path):
    """A server that answers wrongly at full speed (the emulator's wrong_answers fault): the
    speed series stay green, the known answer says 0 and the journal line names the row."""
    emu = emulator("nextn_3step", extra=METRICS, env={"SGLEMU_WARMUP_REQUESTS": "0",
                                                      "SGLEMU_FAULT_WRONG_ANSWERS": "1"})
    path, _ = settings_file(tmp_path, plan, emu.url)
    p = run(program, path)
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    labels = frozenset({"profile": "nextn_3step", "release": plan["release"]["name"],
                        "engine": "sglang"}.items())
    assert fams["sglang_watch_answer_right"] == {labels: 0} and fams["sglang_watch_up"] == {labels: 1}
    assert fams["sglang_watch_decode_tokens_per_second"][labels] > 45
    assert "known answer WRONG" in p.stdout and " WRONG: expected " in p.stdout, p.stdout
