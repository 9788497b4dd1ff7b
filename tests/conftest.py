"""Shared fixtures: real emulator processes on loopback; the engine under ansible.module_utils; the
test tiers (markers in pyproject.toml) and the --no-skips guard `make test` runs with.

How the tests import the repository (no test changes sys.path or loads a file by its path):
  - the engine as ``sglang_perf`` (the venv's editable install of pyproject.toml, make venv);
  - every other file by its path from the root as a package name: ``bench.compare``,
    ``plugins.filter.sglang_profile``, ``plugins.modules.sglang_bench``, ``plugins.callback.
    sglang_rollout``, ``scripts.lock_release``, ``roles.sglang_gate.files.writable_dirs`` (the root
    is on sys.path by pytest's ``pythonpath`` option in pyproject.toml; plugins/, scripts/ and
    roles/ are namespace packages);
  - the modules' own ``from ansible.module_utils.sglang_perf import ...``: below, once.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import ansible.module_utils
import pytest
import yaml

from bench.launch import EmulatorProcess, free_port  # noqa: F401  (re-exported)
from bench.profiles import MODEL_ARGS, PROFILE_ARGS  # noqa: F401  (re-exported)
from sglang_perf.plan.inherit import resolve

ROOT = Path(__file__).resolve().parent.parent
MODULE_UTILS = ROOT / "plugins" / "module_utils"
# -e for runs with the production inventory: its vault file's variables (a test key)
PRODUCTION_VAULT = "@" + str(ROOT / "tests" / "vars" / "production_vault.yml")

# What ansible.cfg's `module_utils = plugins/module_utils` does for a module that AnsiballZ ships
# to a host: the engine importable as ansible.module_utils.sglang_perf, so the tests import the
# module files as they are (plugins.modules.sglang_bench and the rest).
if str(MODULE_UTILS) not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(MODULE_UTILS))


def bench_args(url, cases, profile="p", options=None, **top):
    """The sglang_bench module's arguments for resolved ``cases``: the gate part as the deploy
    plan hands it over (profile, cases, ``options``, and the gate keys among ``top``: promise,
    notes, nvidia_smi, identity, history_path, baseline, measure_lock, model_size, hardware,
    corpus_path), the module's own options (api_key, model, answers, per_request, measure_lock_wait)
    beside it."""
    own = ("api_key", "model", "answers", "per_request", "measure_lock_wait")
    gate = dict({k: v for k, v in top.items() if k not in own}, profile=profile, cases=cases,
                options=dict(options or {}))
    return dict({k: v for k, v in top.items() if k in own}, url=url, gate=gate)


def raw_role_defaults(role="sglang"):
    """A role's defaults/main.yml read as plain YAML (no templating), as written."""
    return yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}


def yaml_strings(node):
    """Every string in a YAML value: its mappings' values and lists' items, nested."""
    if isinstance(node, dict):
        for v in node.values():
            yield from yaml_strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from yaml_strings(v)
    elif isinstance(node, str):
        yield node


def role_defaults(role="sglang"):
    """A role's defaults as plain YAML, its profiles and thresholds flat as the deploy plan
    resolves their bases (sglang_perf.plan.inherit)."""
    defaults = raw_role_defaults(role)
    names = [n for n in ("sglang_profiles", "sglang_gate_thresholds") if n in defaults]
    if names:
        profiles = defaults.get("sglang_profiles") or raw_role_defaults("sglang")["sglang_profiles"]
        # drafters placed beside the model, as the plan places them
        flat = dict(zip(("sglang_profiles", "sglang_gate_thresholds"),
                        resolve(profiles, defaults.get("sglang_gate_thresholds"),
                                raw_role_defaults("sglang")["sglang_model_dir"])))
        defaults.update({n: flat[n] for n in names})
    return defaults


def pytest_addoption(parser):
    parser.addoption("--no-skips", action="store_true",
                     help="fail the run when any test was skipped (make test: every tier must run)")


DEFAULT_HOST = "sglang-local"
_local_host = {}


def local_hosts():
    """The container tier's containers, {name: published port} (scripts/local-host.sh hosts)."""
    if "hosts" not in _local_host:
        out = subprocess.run([str(ROOT / "scripts" / "local-host.sh"), "hosts"], capture_output=True,
                             text=True, check=True).stdout
        _local_host["hosts"] = {n: p for n, p in (ln.split() for ln in out.splitlines() if ln.strip())}
    return _local_host["hosts"]


def local_host_problem(name):
    """Why the local container ``name`` cannot serve a `container` test, or None (asked once)."""
    if name not in _local_host:
        env = dict(os.environ, LOCAL_HOST_NAME=name)
        p = subprocess.run([str(ROOT / "scripts" / "local-host.sh"), "status"], cwd=str(ROOT), env=env,
                           capture_output=True, text=True)
        said = (p.stdout + p.stderr).strip()
        _local_host[name] = None if p.returncode == 0 else (
            "this test needs the local container %s, which is not running (%s): run `make local-host` "
            "(make test starts it), or leave the container tier out: pytest -m 'not container'"
            % (name, said.splitlines()[0] if said else "exit %d" % p.returncode))
    return _local_host[name]


# The container tier's files and the container each runs on (scripts/local-host.sh hosts), so the
# files run side by side, each against its own host; a file not listed runs on DEFAULT_HOST. The
# longest-running first: pytest and the xdist workers start them in this order. Their files'
# times in one fresh-clone CI run (junit.xml, 2903e06), summed per container as listed here:
# sglang-local-2 465 s, -3 465 s, -4 447 s, the default 533 s.
CONTAINER_FILES = {
    "test_history_drift_host.py": "sglang-local-2",
    "test_watch_prometheus.py": "sglang-local-2",
    "test_compare_host.py": "sglang-local-3",
    "test_tune_host.py": "sglang-local-3",
    "test_service_faults.py": "sglang-local-4",
    "test_deploy_lock.py": "sglang-local-4",
    "test_local_host.py": DEFAULT_HOST,
    "test_deploy.py": DEFAULT_HOST,
    "test_deploy_bad_inputs.py": DEFAULT_HOST,
    "test_drafter_host.py": DEFAULT_HOST,
    "test_secrets.py": DEFAULT_HOST,
}


def container_host(item):
    """The container a `container` test runs against, or None for the other tiers."""
    if item.get_closest_marker("container") is None:
        return None
    return CONTAINER_FILES.get(item.path.name, DEFAULT_HOST)


# The other tiers' tests that take 11 s or more in make check's tier (8 workers on 2 cores,
# per-test wall at a2b9c64: 11-127 s, the gate plan's four 65-72), the longest first: but for
# ansible-lint (LINT_TEST), each runs whole commands against emulators and waits on their
# real-time tokens. They start first, so none starts last and stretches the run, and they are
# marked `long`: make check (the inner loop) leaves them to make test, except ansible-lint, the
# inner loop's lint. tests/test_schedule.py checks each exists.
LINT_TEST = "test_playbooks.py::test_ansible_lint_production_profile_no_skips"
LONG_TESTS = (
    "test_tune_cli.py::test_a_drafter_wins_and_its_tuned_vars_deploy",
    "test_gate_plan.py::test_the_hand_launch_memory_settings_fail_on_capacity_naming_both_figures",
    "test_gate_plan.py::test_a_concurrency_cap_fails_the_concurrent_case_and_the_capacity",
    "test_gate_plan.py::test_a_long_context_collapse_fails_the_long_case_alone",
    "test_gate_plan.py::test_the_healthy_3step_server_passes_every_case",
    "test_compare_cli.py::test_compare_plan_answers_whether_more_steps_pay",
    "test_compare_cli.py::test_compare_plan_sets_the_drafter_beside_mtp_per_context_and_with_thinking",
    "test_tune_cli.py::test_nothing_beats_the_current_profile_and_it_is_kept",
    LINT_TEST,
    "test_tune_cli.py::test_listed_profiles_are_launched_as_they_stand_and_the_winner_named",
    "test_tune_cli.py::test_bad_input_is_refused_before_any_launch",
    "test_gate_faults.py::test_fault_fails_the_gate_with_a_reason",
    "test_tune_cli.py::test_the_plays_checked_inputs_plan_as_the_vars_files_do",
    "test_tune_cli.py::test_an_interrupted_run_resumes_without_relaunching_what_it_measured",
    "test_watch_emulator.py::test_the_probe_sends_the_thinking_case_after_the_watched_one",
    "test_compare_cli.py::test_compare_three_profiles_and_compare_report",
    "test_fingerprint.py::test_bench_gate_names_a_slowdown_that_held_the_gpus_during_its_measurement",
    "test_attribution.py::test_bench_gate_writes_the_roles_history_and_names_the_cause_against_it",
    "test_verdict.py::test_error_rates_at_five_percent_from_the_threshold",
    "test_tune_cli.py::test_cases_measure_each_listed_profile_on_them_and_write_compare_reports_results",
    "test_tune_cli.py::test_the_budget_is_one_end_for_every_wait_and_a_cut_launch_says_so",
    "test_tune_cli.py::test_blocks_the_drafter_was_not_trained_for_are_searched_and_noted",
    "test_tune_cli.py::test_a_slowdown_that_held_the_gpus_during_a_launch_is_named",
    "test_gate_faults.py::test_port_open_but_503_fails_the_readiness_wait_in_time",
    "test_tune_cli.py::test_the_space_is_the_hosts_engine_unless_told",
    "test_cli_inventory.py::test_gate_judges_with_the_hosts_calibrated_thresholds",
    "test_ansible_adhoc.py::test_adhoc_pass_and_fail",
    "test_fingerprint.py::test_the_gate_names_a_host_change_first_and_records_the_fingerprint",
    "test_gate_plan.py::test_bench_gate_runs_the_roles_plan_with_exit_codes",
    "test_cli_inventory.py::test_calibrate_writes_where_the_playbook_does_and_gate_judges_with_it",
)


def run_order(item):
    """The container tier first, in CONTAINER_FILES order (its files take the longest), then
    LONG_TESTS, then the rest in collection order."""
    files = list(CONTAINER_FILES)
    if container_host(item):
        return 0, files.index(item.path.name) if item.path.name in files else len(files)
    test = listed_name(item)
    return 1, LONG_TESTS.index(test) if test in LONG_TESTS else len(LONG_TESTS)


def listed_name(item):
    """``file.py::test`` of a collected test (its parameters left out)."""
    return "%s::%s" % (item.path.name, getattr(item, "originalname", item.name))


def pytest_collection_modifyitems(items):
    for item in items:
        if listed_name(item) in LONG_TESTS and listed_name(item) != LINT_TEST:
            item.add_marker(pytest.mark.long)
    items.sort(key=run_order)


def pytest_xdist_make_scheduler(config, log):
    """xdist scheduling by tier: each container's files go to one worker, in file order (their
    tests build on each other's deploys). Without the container tier (make check, -m "not
    container ...") every other test is a unit of its own, so a module of long tests
    (tests/test_gate_plan.py: four of about 50 s) spreads over the workers instead of holding one
    (make check: 262 s with a module a unit, 105-153 s so); beside the container tier a module is
    the unit, so those emulator-bound tests do not all run at once while the containers' gates
    measure (a C=4 case fell below its bar so). (xdist 3.8's --dist loadgroup does not group
    under pytest 9: it renames item._nodeid, which pytest 9 no longer reads.)"""
    per_test = "not container" in (config.getoption("markexpr") or "")
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def __init__(self, config, log=None):
            LoadScopeScheduling.__init__(self, config, log)
            config.option.loadscopereorder = False  # keep the collection's order (above)

        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            name = path.rsplit("/", 1)[-1]
            if name in CONTAINER_FILES:
                return "container:" + CONTAINER_FILES[name]
            return nodeid if per_test else path

    return TierScheduling(config, log)


def pytest_runtest_setup(item):
    host = container_host(item)
    if host is None:
        return
    hosts = local_hosts()
    if host not in hosts:
        pytest.fail("container %s is not one of scripts/local-host.sh hosts: %s" % (host, ", ".join(hosts)),
                    pytrace=False)
    # Everything the test starts (ansible, local-host.sh, podman) talks to this container.
    os.environ.update(LOCAL_HOST_NAME=host, LOCAL_HOST_PORT=hosts[host])
    if not item.get_closest_marker("container").kwargs.get("starts_it"):
        problem = local_host_problem(host)
        if problem:
            pytest.fail(problem, pytrace=False)


_skipped = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append("%s: %s" % (report.nodeid, report.longrepr[2] if isinstance(report.longrepr, tuple)
                                    else report.longrepr))


def pytest_sessionfinish(session, exitstatus):
    controller = not hasattr(session.config, "workerinput")  # xdist workers report to it
    if controller and session.config.getoption("--no-skips") and _skipped and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_line("--no-skips: %d test(s) skipped, which make test does not allow:" % len(_skipped),
                          red=True)
            for line in _skipped:
                tr.write_line("  " + line, red=True)


class Emulator(EmulatorProcess):
    """An emulator on 127.0.0.1 with its log and its exact counters."""

    def __init__(self, args, env=None, wait=True):
        self.logfile = tempfile.TemporaryFile()
        # Tests are reproducible: a fixed seed unless the test sets one (the emulator's own
        # default is a new seed per start).
        env = dict({"SGLEMU_SEED": "0"}, **(env or {}))
        EmulatorProcess.__init__(self, args, self.logfile, env=env)
        self.api_key = args[args.index("--api-key") + 1] if "--api-key" in args else None
        if wait:
            self.wait_healthy()

    def wait_healthy(self, timeout=30.0):
        try:
            self.wait_ready("/health", timeout)
        except RuntimeError as e:
            raise RuntimeError("%s: %s" % (e, self.output()))

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.loads(r.read())

    def post(self, path, body=None):
        req = urllib.request.Request(self.url + path, data=json.dumps(body or {}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"{}")

    def stats(self):
        return self.get("/_emulator/stats")

    def output(self):
        """Everything the emulator printed so far (its log, like the unit's journal)."""
        self.logfile.seek(0)
        return self.logfile.read().decode(errors="replace")

    def stop(self):
        EmulatorProcess.stop(self)
        self.logfile.close()


@pytest.fixture
def emulator():
    """Factory: emulator(profile_or_args, env=None, extra=[]) -> running Emulator."""
    started = []

    def start(profile="nextn_3step", env=None, extra=(), wait=True):
        args = list(MODEL_ARGS) + (list(PROFILE_ARGS[profile]) if isinstance(profile, str)
                                   else list(profile)) + list(extra)
        emu = Emulator(args, env=env, wait=wait)
        started.append(emu)
        return emu

    yield start
    for emu in started:
        emu.stop()
