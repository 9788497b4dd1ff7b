"""The watch and the deploy know each other, and its decode figure is judged against the bar for
what it saw (sglang_perf/host/watch.py, measurelock.py, the sglang_bench module), as Python calls: a
held deploy lock makes a run ``deploying`` (no probe, no figures, no ``up``), an unreadable one
counts as held, a stale one is ignored and named; the probe and the gate share the host's
measurement lock (two holders, in threads and processes); and the decode bar a run writes - a
probe against the coding bar, a quiet window against the passive bar, deeper prompts and several
streams not judged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from ansible.module_utils.sglang_perf.measure.client import MeasureError
from conftest import ROOT
from planutil import plan_for
from plugins.filter.sglang_watch_program import sglang_watch_program
from sglang_perf.plan import deploy as deploy_plan
from sglang_perf import engines
from sglang_perf.host import measurelock, watch
from test_module import call, gate, patched  # noqa: F401 (autouse: the module exits by exception)
from test_watch import LABELS, SETTINGS, families, inputs, sglang
from test_watch_emulator import HOST_PYTHON, METRICS, run, settings_file

NOW = 1796000000.0
PROBE = {"decode_tok_s": {"median": 57.5}, "accept_len": 3.3, "aggregate_tok_s": 41.0, "requests": 3,
         "server": {"kind": "sglang"}}


# --- the deploy lock ------------------------------------------------------------------------

def holder(age_s, **extra):
    return dict({"controller": "laptop", "user": "root", "pid": 4242, "playbook": "deploy.yml",
                 "started": NOW - age_s, "token": "t0k3n"}, **extra)


@pytest.mark.parametrize("held, is_held, words", [
    (None, False, None),
    (holder(1), True, "a deploy holds the host's lock: root@laptop (pid 4242, playbook deploy.yml) since "),
    (holder(6 * 3600), True, "6.0 h ago"),                       # at its max age: still held
    (holder(6 * 3600 + 1), False, "a stale deploy lock, ignored: root@laptop"),
    (holder(100000), False, "older than its max age (6.0 h)"),
    (watch.UNREADABLE, True, "the deploy lock is unreadable: counted as held"),
    ({"token": "t0k3n"}, True, "unreadable"),                    # no start: a hand-made lock
    (holder(1, started="yesterday"), True, "unreadable"),
])
def test_the_deploy_lock_is_held_until_its_max_age(held, is_held, words):
    got, note = watch.deploy_lock_held(held, NOW, 21600)
    assert got is is_held
    assert note is None if words is None else words in note, note


@pytest.mark.parametrize("text, held", [
    (None, None),
    (json.dumps(holder(5)), holder(5)),
    ("", watch.UNREADABLE),                                      # being written
    ('{"controller": "lap', watch.UNREADABLE),
    ("[1, 2]", watch.UNREADABLE),
])
def test_the_lock_file_is_read_as_the_lock_module_writes_it(tmp_path, text, held):
    path = tmp_path / "deploy.lock"
    if text is not None:
        path.write_text(text)
    assert watch.read_deploy_lock(str(path)) == held


def test_a_lock_path_the_run_cannot_read_counts_as_held(tmp_path):
    (tmp_path / "deploy.lock").mkdir()
    assert watch.read_deploy_lock(str(tmp_path / "deploy.lock")) == watch.UNREADABLE


class Host(object):
    """A run's surroundings, patched: the deploy lock file, the measurement lock, scrapes of an
    idle or busy SGLang server, and a probe that records when it ran."""

    def __init__(self, tmp_path, monkeypatch, scrapes=None):
        self.lock_path, self.measure_path = tmp_path / "deploy.lock", tmp_path / "measure.lock"
        self.measure_path.write_text("")
        self.settings = dict(SETTINGS, url="http://127.0.0.1:9", window_s=1, timeout_s=60,
                             probe={"case": "coding", "prompts": "coding", "requests": 3, "max_tokens": 96},
                             passive={"min_tok_s": 33, "max_prompt_tokens": 32768},
                             deploy_lock={"path": str(self.lock_path), "max_age_s": 21600},
                             measure_lock=str(self.measure_path))
        self.scrapes = list(scrapes or [sglang(gen=500, verify=160, requests=3)] * 2)
        self.scraped, self.probed, self.during_window, self.during_probe = 0, [], None, None
        monkeypatch.setattr(watch, "scrape", self.scrape)
        monkeypatch.setattr(watch, "probe", self.probe)

    def hold(self, age_s=10):
        self.lock_path.write_text(json.dumps(holder(age_s, started=time.time() - age_s)))

    def scrape(self, endpoint, timeout):
        self.scraped += 1
        return self.scrapes.pop(0)

    def sleep(self, seconds):
        if self.during_window:
            self.during_window()

    def probe(self, settings, key):
        # the lock is this run's while it probes: another holder (the gate) cannot take it
        with pytest.raises(measurelock.Busy):
            measurelock.acquire(str(self.measure_path))
        self.probed.append(time.monotonic())
        if self.during_probe:
            return self.during_probe()
        return watch.observe_probe(PROBE)

    def run(self):
        return watch.run(self.settings, sleep=self.sleep)


def test_a_held_deploy_lock_is_deploying_without_a_scrape_a_probe_or_up(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)
    host.hold()
    obs = host.run()
    assert (obs["state"], obs["up"], obs["source"]) == ("deploying", None, "none")
    assert (host.scraped, host.probed) == (0, [])
    assert obs["note"].startswith("a deploy holds the host's lock: root@laptop")
    fams = families(watch.render(host.settings, obs, NOW))
    assert fams["sglang_watch_deploying"] == {LABELS: 1}
    assert "sglang_watch_up" not in fams and "sglang_watch_decode_bar_tokens_per_second" not in fams
    assert set(fams) == {"sglang_watch_deploying", "sglang_watch_source", "sglang_watch_interval_seconds",
                         "sglang_watch_decode_threshold_tokens_per_second",
                         "sglang_watch_last_run_timestamp_seconds"}
    assert watch.summary(obs).startswith("deploying (source none); a deploy holds the host's lock")


def test_without_a_lock_the_idle_server_is_probed_under_the_measurement_lock(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)
    obs = host.run()
    assert (obs["state"], obs["up"], obs["source"], len(host.probed)) == ("idle", 1, "probe", 1)
    fams = families(watch.render(host.settings, obs, NOW))
    assert (fams["sglang_watch_deploying"], fams["sglang_watch_up"]) == ({LABELS: 0}, {LABELS: 1})
    measurelock.release(measurelock.acquire(str(host.measure_path)))  # given back


def test_a_deploy_that_takes_the_lock_during_the_window_wins(tmp_path, monkeypatch):
    """The server restarts under the new lock: the second scrape finds nothing - not down."""
    host = Host(tmp_path, monkeypatch, scrapes=[sglang(gen=500, verify=160, requests=3), None])
    host.during_window = host.hold
    obs = host.run()
    assert (obs["state"], obs["up"], host.probed) == ("deploying", None, [])


def test_a_deploy_that_takes_the_lock_during_the_probe_wins_over_its_failure(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)

    def restarted():
        host.hold()
        return watch.probe_failed("all 3 measured requests failed (3 x connection refused)")
    host.during_probe = restarted
    obs = host.run()
    assert (obs["state"], obs["up"], len(host.probed)) == ("deploying", None, 1)
    assert "sglang_watch_up" not in families(watch.render(host.settings, obs, NOW))


def test_a_stale_lock_is_ignored_and_named(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)
    host.hold(age_s=7 * 3600)
    obs = host.run()
    assert (obs["state"], obs["up"], obs["source"]) == ("idle", 1, "probe")
    assert obs["note"].startswith("a stale deploy lock, ignored: root@laptop") and "7.0 h ago" in obs["note"]


def test_an_unreadable_lock_is_deploying(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)
    host.lock_path.write_text('{"controller": "lap')
    obs = host.run()
    assert (obs["state"], host.scraped) == ("deploying", 0)


def test_a_probe_never_runs_while_the_gate_measures(tmp_path, monkeypatch):
    """The gate holds the measurement lock (its long-context prefill: no token in the window): no
    probe this run, and the run is written as deploying."""
    host = Host(tmp_path, monkeypatch)
    with measurelock.held(str(host.measure_path)):
        obs = host.run()
    assert (obs["state"], obs["up"], host.probed) == ("deploying", None, [])
    assert obs["note"] == ("the measurement lock %s is held (the gate measures): no probe this run"
                           % host.measure_path)


def test_a_missing_measurement_lock_file_means_no_probe(tmp_path, monkeypatch):
    host = Host(tmp_path, monkeypatch)
    host.measure_path.unlink()
    obs = host.run()
    assert (obs["state"], obs["up"], obs["source"], host.probed) == ("idle", 1, "none", [])
    assert obs["note"].startswith("no probe: cannot open the measurement lock %s" % host.measure_path)
    assert not host.measure_path.exists()  # the watch never creates it (its sandbox cannot)


# --- the measurement lock: two holders --------------------------------------------------------

HOLD = ("import sys, time; sys.path.insert(0, %r); from sglang_perf.host import measurelock\n"
        "with measurelock.held(sys.argv[1]):\n"
        "    print('held', flush=True); time.sleep(float(sys.argv[2]))\n"
        % str(ROOT / "plugins" / "module_utils"))


def holding(path, seconds):
    """Another process holding the lock for ``seconds`` (started once it holds it)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline() == "held\n"
    return p


def test_a_waiting_holder_waits_out_another_process_and_a_busy_one_is_refused(tmp_path):
    path = tmp_path / "measure.lock"
    p = holding(path, 1.0)
    try:
        with pytest.raises(measurelock.Busy, match="another measurement holds it$"):
            measurelock.acquire(str(path))                   # the probe: never waits
        t0 = time.monotonic()
        with pytest.raises(measurelock.Busy, match="after 0 s of waiting"):
            measurelock.acquire(str(path), wait_s=0.3)
        assert time.monotonic() - t0 >= 0.3
        with measurelock.held(str(path), wait_s=30):      # the gate: waits the probe out
            assert p.poll() is not None or time.monotonic() - t0 >= 0.8
    finally:
        p.wait(10)


def test_a_killed_holder_leaves_the_lock_free(tmp_path):
    path = tmp_path / "measure.lock"
    p = holding(path, 60)
    with pytest.raises(measurelock.Busy):  # held while its holder runs
        measurelock.acquire(str(path))
    p.kill()
    p.wait(10)
    fd = measurelock.acquire(str(path))  # free once it is killed: Busy would fail the test
    measurelock.release(fd)


def test_the_measurement_lock_sits_beside_the_deploy_lock():
    assert measurelock.beside("/var/lib/sglang/deploy.lock") == "/var/lib/sglang/measure.lock"
    assert measurelock.beside("deploy.lock") is None and measurelock.beside(None) is None
    plan = plan_for({"sglang_deploy_lock_path": "/srv/state/locks/deploy.lock"})
    assert plan["lock"]["measure_path"] == "/srv/state/locks/measure.lock"


def test_the_gate_waits_for_a_running_probe_before_it_sends_a_request(tmp_path, monkeypatch):
    """The sglang_bench module (the gate's measurement on the host) and the watch's probe in two
    threads: the module's first request comes after the probe ended."""
    path = tmp_path / "measure.lock"
    path.write_text("")
    settings = {"measure_lock": str(path), "deploy_lock": {"path": str(tmp_path / "deploy.lock")}}
    times = {}

    def slow_probe(settings, key):
        times["probe_start"] = time.monotonic()
        time.sleep(1.0)
        times["probe_end"] = time.monotonic()
        return watch.observe_probe(PROBE)

    def discover(endpoint, model):  # the plan's first request
        times["gate_start"] = time.monotonic()
        raise MeasureError("stop here")

    monkeypatch.setattr(watch, "probe", slow_probe)
    from plugins.modules import sglang_bench
    monkeypatch.setattr(sglang_bench.plan.engine, "discover", discover)
    idle = watch.observe_window(sglang(), sglang(), 1.0)
    probing = threading.Thread(target=watch.probe_locked, args=(settings, None, idle))
    probing.start()
    while "probe_start" not in times:
        time.sleep(0.01)
    kind, result = call(gate("http://127.0.0.1:9", measure_lock=str(path), measure_lock_wait=30))
    probing.join(10)
    assert kind == "fail" and result["msg"] == "could not measure http://127.0.0.1:9: stop here"
    assert times["gate_start"] >= times["probe_end"]


def test_the_gate_fails_naming_the_lock_when_it_stays_held(tmp_path):
    path = tmp_path / "measure.lock"
    with measurelock.held(str(path)):
        kind, result = call(gate("http://127.0.0.1:9", measure_lock=str(path), measure_lock_wait=0))
    assert kind == "fail"
    assert result["msg"] == ("could not measure http://127.0.0.1:9: the host's measurement lock %s: another "
                             "measurement holds it" % path)


# --- the decode bar: like with like ----------------------------------------------------------

PASSIVE = dict(SETTINGS, passive={"min_tok_s": 33, "max_prompt_tokens": 32768})


def window(decode, prompt_tokens, running=1):
    return {"state": "busy", "up": 1, "source": "metrics", "engine": "sglang", "accept_len": None,
            "decode_tok_s": decode, "generation_tok_s": decode, "running": running, "requests": 1,
            "note": None, "prompt_tokens": prompt_tokens}


@pytest.mark.parametrize("obs, bar, why", [
    # one user on prose (the emulator's accept length 2.4 on prose, at the 3-step step time:
    # 2.4 / 56.4 ms = 42.5 tok/s): under the coding bar by design, over the passive bar
    (window(42.5, 180), 33, "prose"),
    # a 32K context at the gate's own long-context bar (its case: 32,768 prompt tokens)
    (window(33.0, 32766), 33, "32K at its bar"),
    (window(33.0, 32768), 33, "as deep as the deepest judged case"),
    (window(30.0, 32769), None, "deeper than any case the gate judges"),
    (window(25.0, 65536), None, "64K"),
    (window(25.0, 100000), None, "100K"),
    (window(58.0, 1), 33, "a one-token prompt"),
    (window(58.0, 1024), 33, "1,024"),
    (window(30.0, 180, running=4), None, "C=4: four streams each slower by design"),
    (window(40.0, 180, running=2), None, "two streams"),
    (window(40.0, 180, running=0), 33, "a short request between the gauge's readings"),
    (window(40.0, 180, running=None), None, "running not known"),
    (window(40.0, None), None, "no finished request: its prompt not known"),
    (window(None, 180), None, "no decode figure"),
    # the probe: the coding case at C=1, judged against its own bar, slow or not
    (watch.observe_probe(dict(PROBE, decode_tok_s={"median": 39.2})), 45, "a slow probe"),
    (watch.observe_probe(PROBE), 45, "a healthy probe"),
    (watch.observe_probe(dict(PROBE, metrics={"matches_client": False, "note": "other tokens"})), None,
     "a probe with other traffic beside it"),
    (watch.probe_failed("x"), None, "a failed probe"),
    (watch.observe_deploying("held"), None, "deploying"),
])
def test_the_decode_bar_is_the_one_for_what_the_run_saw(obs, bar, why):
    assert watch.decode_bar(PASSIVE, obs) == bar, why
    fams = families(watch.render(PASSIVE, obs, NOW))
    written = fams.get("sglang_watch_decode_bar_tokens_per_second")
    assert written == (None if bar is None else {LABELS: bar}), why
    assert fams.get("sglang_watch_decode_threshold_tokens_per_second") == {LABELS: 45}  # kept, always


def test_without_a_passive_bar_a_window_is_not_judged():
    assert watch.decode_bar(SETTINGS, window(20.0, 180)) is None
    assert watch.decode_bar(dict(SETTINGS, passive=None), window(20.0, 180)) is None


PROMPT = engines.sglang.counters["prompt_tokens"]


def prompted(scrape, prompt_tokens):
    """An SGLang scrape whose prompt counter is at ``prompt_tokens`` (None: not counted yet)."""
    return scrape if prompt_tokens is None else dict(scrape, **{PROMPT: float(prompt_tokens)})


@pytest.mark.parametrize("before, after, mean", [
    # SGLang counts a request's prompt and the request itself when it finishes
    (prompted(sglang(requests=3), 540), prompted(sglang(requests=4), 720), 180.0),
    (prompted(sglang(), None), prompted(sglang(requests=1), 180), 180.0),              # the first request
    (prompted(sglang(requests=3), 540), prompted(sglang(requests=9), 1620), 180.0),    # six of them
    (prompted(sglang(requests=3), 540), prompted(sglang(requests=4), 541), 1.0),
    (prompted(sglang(requests=3), 540), prompted(sglang(requests=4), 100540), 100000.0),
    (prompted(sglang(requests=3), 540), prompted(sglang(requests=3), 540), None),      # none finished
    (prompted(sglang(requests=3), 540), None, None),                                   # no answer
    (prompted(sglang(requests=9), 1620), prompted(sglang(requests=1), 180), None),     # restarted
])
def test_the_windows_mean_prompt_is_prompt_tokens_per_finished_request(before, after, mean):
    assert watch.window_prompt_tokens(before, after) == mean


@pytest.mark.parametrize("finished, prompt_sum, mean", [
    (1, 180.0, 180.0), (6, 6 * 32768.0, 32768.0), (1024, 1024 * 12.0, 12.0), (100000, 1e5 * 70000.0, 70000.0),
    (0, 0.0, None),
])
def test_vllms_mean_prompt_is_its_per_request_histogram(finished, prompt_sum, mean):
    """vLLM counts a prompt at its first token and a request at its end, so its counters do not
    describe the same requests in a window; its per-request histogram vllm:request_prompt_tokens
    (observed when a request finishes) does. The counters here say 1,180 / 1: not what is read."""
    c, hist = engines.vllm.counters, engines.vllm.request_prompt_tokens
    before = {c["generation_tokens"]: 100.0, c["prompt_tokens"]: 1000.0, c["requests"]: 1.0,
              hist + "_sum": 1000.0, hist + "_count": 1.0}
    after = {c["generation_tokens"]: 200.0, c["prompt_tokens"]: 2180.0, c["requests"]: 2.0,
             hist + "_sum": 1000.0 + prompt_sum, hist + "_count": 1.0 + finished}
    assert watch.window_prompt_tokens(before, after) == mean


def test_vllm_without_the_histogram_is_not_judged_passively():
    c = engines.vllm.counters
    before = {c["generation_tokens"]: 100.0, c["prompt_tokens"]: 1000.0, c["requests"]: 1.0}
    after = {c["generation_tokens"]: 200.0, c["prompt_tokens"]: 1180.0, c["requests"]: 2.0}
    assert watch.window_prompt_tokens(before, after) is None


def test_a_busy_run_carries_its_windows_mean_prompt_to_the_bar(tmp_path, monkeypatch):
    """One 32K request finished in the window, streaming at 38.4 tok/s: judged against the
    passive bar."""
    before = prompted(sglang(gen=500, verify=160, requests=3, running=1, itl=(10.0, 500)), 98304)
    after = prompted(sglang(gen=596, verify=190, requests=4, running=1, itl=(12.5, 596)), 131072)
    host = Host(tmp_path, monkeypatch, scrapes=[before, after])
    obs = host.run()
    assert (obs["state"], obs["prompt_tokens"], obs["decode_tok_s"]) == ("busy", 32768.0, pytest.approx(38.4))
    assert watch.decode_bar(host.settings, obs) == 33


@pytest.fixture(scope="module")
def production_plan():
    return plan_for(plumbing=False)


def test_the_passive_bar_is_the_slowest_the_gate_judges_at_one_stream(production_plan):
    """Production: coding 45, long_context 33 at 32,768 tokens; concurrent (C=4) and prose (report
    only) do not count."""
    assert watch.passive_bar(production_plan["gate"]["cases"]) == {"min_tok_s": 33,
                                                                   "max_prompt_tokens": 32768}
    plumbing = plan_for()  # coding only: its short prompts
    assert watch.passive_bar(plumbing["gate"]["cases"]) == {"min_tok_s": 45, "max_prompt_tokens": 1024}
    cases = json.loads(json.dumps(production_plan["gate"]["cases"]))
    by_name = {c["case"]: c for c in cases}
    by_name["prose"]["thresholds"] = {"min_tok_s": 20}        # report only: never a bar
    by_name["concurrent"]["thresholds"]["min_tok_s"] = 10     # C=4: not one stream
    assert watch.passive_bar(cases) == {"min_tok_s": 33, "max_prompt_tokens": 32768}
    by_name["long_context"]["thresholds"].pop("min_tok_s")    # a long case without a speed bar
    assert watch.passive_bar(cases) == {"min_tok_s": 45, "max_prompt_tokens": 1024}
    by_name["coding"]["thresholds"].pop("min_tok_s")
    assert watch.passive_bar(cases) is None


def test_a_calibrated_long_context_bar_is_the_passive_bar():
    plan = plan_for({"sglang_gate_calibrated": {"nextn_3step": {"long_context": {"min_tok_s": 36.5}}}},
                    plumbing=False)
    settings, problems = watch.configure(plan, inputs())
    assert problems == [] and settings["passive"] == {"min_tok_s": 36.5, "max_prompt_tokens": 32768}


def test_the_settings_carry_the_deploy_lock_of_the_plan():
    plan = plan_for({"sglang_deploy_lock_path": "/srv/state/deploy.lock", "sglang_deploy_lock_max_age": 7200,
                     "sglang_watch_enabled": True}, roles=deploy_plan.ROLES)
    assert plan["problems"] == []
    settings = plan["watch"]["settings"]
    assert settings["deploy_lock"] == {"path": "/srv/state/deploy.lock", "max_age_s": 7200}
    assert settings["measure_lock"] == "/srv/state/measure.lock"


def test_the_installed_program_writes_deploying_under_a_held_lock(emulator, tmp_path):
    """The one-file program by the host's Python against an idle emulator: under the deploy lock
    the lock file names, nothing is sent and no up written; once the lock is gone, the probe."""
    program = tmp_path / "sglang-watch"
    program.write_text(sglang_watch_program(HOST_PYTHON))
    program.chmod(0o755)
    emu = emulator("nextn_3step", extra=METRICS, env={"SGLEMU_WARMUP_REQUESTS": "0"})
    path, settings = settings_file(tmp_path, plan_for(), emu.url)
    labels, lock = frozenset(settings["labels"].items()), settings["deploy_lock"]["path"]
    with open(lock, "w") as f:
        json.dump(holder(0, started=time.time() - 30), f)
    p = run(program, path)
    assert p.stdout.startswith("sglang-watch: deploying (source none); a deploy holds the host's lock: "
                               "root@laptop (pid 4242, playbook deploy.yml)"), p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    assert fams["sglang_watch_deploying"] == {labels: 1} and "sglang_watch_up" not in fams
    assert [r for r in emu.stats()["requests"] if not r["health"]] == []
    os.unlink(lock)
    p = run(program, path)
    assert p.stdout.startswith("sglang-watch: up 1, idle (source probe)"), p.stdout
    fams = families((tmp_path / "sglang_watch.prom").read_text())
    assert fams["sglang_watch_deploying"] == {labels: 0}
    assert fams["sglang_watch_decode_bar_tokens_per_second"] == {labels: 45}
