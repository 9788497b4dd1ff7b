"""``python -m bench tune``: the fastest setting that passes the host's gate, within a launch budget.

    python -m bench tune --launch 'COMMAND' (-i INVENTORY --host NAME | --vars FILE ...)
        [--engines sglang,vllm] [--space FILE | --profiles NAME,...] [--budget-launches N]
        [--budget-minutes M] [--objective CASE] [--out DIR] [--check]
        [--profiles NAME,... --cases FILE [--results FILE]]

COMMAND starts one candidate server: ``{args}`` becomes the candidate's engine arguments exactly
as the unit's ExecStart passes them after the launch module (rendered by the deploy plan's own
code for the engine and version the host runs) with the port the tuner chose, ``{port}`` that
port (``{args_remote}``: the arguments quoted once more, for a command that hands them to a
second shell, as ssh does); ``ENGINE=COMMAND`` gives one engine its own command. Each launch
runs in a process group of its own: started, waited for as the deploy waits (the engine's
readiness paths, the host's sglang_ready_timeout), measured on the host's gate plan with its
current profile's thresholds (the objective case first: a launch whose upper bound is under the
leader's lower bound stops there), then stopped (SIGTERM, then SIGKILL; a process left behind is
an error; then --stop's command, for what the launch started elsewhere). The search and the
answer are plugins/module_utils/sglang_perf/judge/tune.py's. ``--profiles`` tunes over an explicit
list of the host's own profiles instead of a space (a comparison judged as the tuner judges): each
launched once as it stands, the current first; with ``--cases FILE`` the list is measured, not
searched (playbooks/compare.yml: only the listed, every case of the file without thresholds, the
plan results to --results and, when the file asks for it, the comparison's report from them:
compare.md, .csv, .json, .png, as ``bench compare-report`` writes them); ``--check`` reads and
checks everything and launches nothing.

Writes DIR/tune.md (the answer first, then every launch), tune.json, tune.png and tuned.yml (the
winner as a named profile with thresholds from its own figures, and sglang_profile set to it:
``ansible-playbook deploy.yml -e @DIR/tuned.yml``). Exit status: 0 an answer (the winner, or the
current profile kept), 1 no setting passed, 2 bad input (before any launch), the host's own
profile refused by its preflight, or a candidate not stopped cleanly (the search stops there).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from sglang_perf.plan import capacity, drafter, inherit, gate as plan
from sglang_perf import engines
from sglang_perf.record import fingerprint
from sglang_perf.judge import setting, tune, verdict
from sglang_perf.measure import config
from sglang_perf.measure.client import ConfigError

from bench import common, compare, compare_plan, gate, tune_report
from bench.common import EXIT_FAILED, EXIT_PASSED, EXIT_UNMEASURED
from bench.candidate import CUT, LaunchError, launch_commands, past, port_taken, run_one
from bench.paths import ROOT

DEFAULT_OUT = ROOT / "out" / "tune"


class TuneError(ValueError):
    pass


# ------------------------------------------------------------------------------ the host ------
class Host(object):
    """The host as the planner has it (bench/planner.py: its variables as ansible-playbook sees
    them, or a host of no inventory under --vars files), its profiles and gate plan, and the
    deploy plan of a setting."""

    def __init__(self, args):
        from bench import planner
        extra = {}
        if args.api_key:
            # a key given by the environment (playbooks/tune.yml): the host has one, whatever the
            # inventory's vault this process cannot read says (the argv names its --config file)
            extra[planner.SECRET] = args.api_key
        try:
            if args.inputs:
                self.host = gate.inputs_host(args, "tune", extra)
            elif args.inventory:
                if not args.host:
                    raise TuneError("-i %s needs --host NAME" % args.inventory)
                self.host = planner.host_for(args.inventory, args.host, extra, vars_files=args.vars or (),
                                             vault_password_file=args.vault_password_file)
            else:
                self.host = planner.host_for(None, "tune", extra, vars_files=args.vars or (),
                                             vault_password_file=args.vault_password_file)
                self.host.vars["inventory_dir"] = str(DEFAULT_OUT)
            # plain data (Ansible's tagged strings are not YAML's): what tuned.yml and tune.json write
            self.v = json.loads(json.dumps(self.host.values()))
        except common.PlanError as e:
            raise TuneError(str(e))
        if not args.api_key:  # the host's own (a vault -i reads): every candidate is measured with it
            args.api_key = self.host.api_key()
        raw, raw_thresholds = inherit.with_host(self.v.get("sglang_profiles") or {},
                                                self.v.get("sglang_gate_thresholds"),
                                                self.v.get("sglang_host_profiles"),
                                                self.v.get("sglang_gate_host_thresholds"))
        self.raw_profiles, self.raw_thresholds = dict(raw), dict(raw_thresholds or {})
        self.profiles, self.thresholds, problems = inherit.resolve(
            self.raw_profiles, self.raw_thresholds, self.v.get("sglang_model_dir"))
        if problems:
            raise TuneError("; ".join(problems))
        self.current = self.v.get("sglang_profile")
        if self.current not in self.profiles:
            raise TuneError("sglang_profile %r is not in sglang_profiles" % (self.current,))
        # --cases: each profile planned as measured there, without thresholds (its own, which its
        # launch is not held to, cannot refuse it: no_spec beside the MTP depths)
        self.measure_only = False

    def current_key(self):
        """The current profile as a setting of the space's shape."""
        return self.key_of(self.current)

    def key_of(self, name, named=False):
        """The profile ``name`` as a setting of the space's shape; ``named``: a setting.Named, which
        the tuner launches as the profile itself (--profiles)."""
        # a fraction left to the engine: the one the memory preflight assumes
        return setting.of_profile(self.profiles[name], self.v.get("sglang_engine"),
                                  self.v["sglang_memory_default_fraction"], name if named else None)

    def listed(self, names, current_first=True):
        """The setting.Named keys of --profiles' ``names`` (comma-separated), the current profile
        first (the figure to beat: measured whether listed or not) unless not ``current_first`` (a
        comparison's: these and no other); TuneError naming a profile the host does not have, or
        one listed twice."""
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in self.profiles]
        if unknown or not wanted:
            raise TuneError("--profiles: %s (the host's profiles: %s)" % (
                "no profile %s" % ", ".join(unknown) if unknown else "names none",
                ", ".join(sorted(self.profiles))))
        twice = sorted({n for n in wanted if wanted.count(n) > 1})
        if twice:
            raise TuneError("--profiles names %s more than once" % ", ".join(twice))
        if current_first:
            wanted = [self.current] + [n for n in wanted if n != self.current]
        return [self.key_of(n, named=True) for n in wanted]

    def drafter_blocks(self, given=(), root=None):
        """{drafter path: the block it was trained for} of the host's drafter profiles: ``given``
        (--drafter-block [PATH=]N: a bare N for every drafter), else the drafter's config.json where
        this machine has it - at its path, or under ``root`` (--drafter-root: copies of the host's
        files under their host paths) - None when unknown. The deploy refuses any other block."""
        out = {}
        for p in self.profiles.values():
            path = p.get(drafter.SETTING) if isinstance(p, dict) and p.get("draft_model") else None
            if not path:
                continue
            local = Path(root + "/" + path.lstrip("/")) if root else Path(path)
            try:
                out[path] = drafter.trained_block(json.loads((local / "config.json").read_text()))
            except (OSError, ValueError):
                out[path] = None
        for text in given or ():
            where, sep, n = text.rpartition("=")
            try:
                block = int(n)
            except ValueError:
                raise TuneError("--drafter-block takes [PATH=]N, got %r" % text)
            for path in out:
                if not sep or path == where:
                    out[path] = block
        return out

    def drafter_engines(self):
        return {e for e in engines.names()
                if tune.template_of(self.profiles, e, "block", self.current, self.v.get("sglang_engine"))
                is not None}

    def setting(self, key):
        """(name, raw profile entry, flat profile) of a setting; the current key is the current
        profile itself, a setting.Named the profile it names."""
        if isinstance(key, setting.Named):
            return key.profile, self.raw_profiles[key.profile], self.profiles[key.profile]
        if key == self.current_key():
            return self.current, self.raw_profiles[self.current], self.profiles[self.current]
        made = tune.settings_of(key, self.profiles, self.current, self.v.get("sglang_engine"))
        if made is None:
            return None
        base, diff = made
        entry = dict({"base": base}, **diff)
        return setting.key_name(key), entry, tune.flat(base, self.profiles[base], diff)

    def render(self, key, port):
        """(argv after the launch module, problems, the deploy plan) of a setting, by the deploy
        planner (bench/planner.py, as a unit rendered for review): the host's inputs templated and
        type-checked once, then planned with the setting as its profile."""
        p = self.planned(key, port)
        if p is None:
            return None, ["the host has no profile of this kind to write it over (a drafter profile)"], None
        problems = [x.split(": ", 1)[1] if x.startswith("%s: " % p.get("host")) else x
                    for x in p.get("problems") or []]
        argv = (p.get("server") or {}).get("argv")
        if problems or not argv:
            return None, problems or ["no command line rendered"], p
        return argv[3:], [], p

    def planned(self, key, port):
        """The deploy plan of a setting on ``port`` (None: no profile to write it over)."""
        made = self.setting(key)
        if made is None:
            return None
        name, entry, _ = made
        overrides = dict(sglang_profiles=dict(self.raw_profiles, **{name: entry}), sglang_profile=name,
                         sglang_port=port)
        if self.measure_only:  # every case of the plan measured without thresholds ({})
            overrides["sglang_gate_host_thresholds"] = dict(
                self.v.get("sglang_gate_host_thresholds") or {},
                **{name: {case: {} for case in self.v.get("sglang_gate_plan") or {}}})
            overrides["sglang_gate_calibrated"] = {
                k: v for k, v in (self.v.get("sglang_gate_calibrated") or {}).items() if k != name}
        elif name != self.current:  # a candidate: the service bars (the current keeps its own)
            overrides["sglang_gate_host_thresholds"] = dict(self.v.get("sglang_gate_host_thresholds") or {},
                                                            **{name: self.service_bars()})
        return self.host.plan(**overrides)

    def service_bars(self):
        """{case: thresholds} every candidate is held to (tune.service_bars of the current's)."""
        return tune.service_bars(self.thresholds.get(self.current))

    def capacity_model(self, key, mem):
        """The memory model's (KV tokens, running requests) of a setting at ``mem``, or None."""
        made = self.setting(key)
        if made is None or not self.v.get("sglang_hardware") or not self.v.get("sglang_model_size"):
            return None
        try:
            b = capacity.profile_memory_budget(dict(made[2], mem_fraction_static=mem),
                                               self.v["sglang_model_size"],
                                               self.v["sglang_hardware"],
                                               self.v.get("sglang_memory_full_context_requests") or 1)
        except capacity.CapacityError:
            return None
        return b["kv_tokens"], b["effective_running_requests"]


# ---------------------------------------------------------------------------- measuring ------
def objective_figures(result, case):
    """(outcome figures) of the objective case of a plan result."""
    r = next((c for c in result.get("cases") or [] if c.get("case") == case), None) or {}
    iv = (r.get("intervals") or {}).get("decode_tok_s") or {}
    return {"tok_s": {k: iv.get(k) for k in ("estimate", "lower", "upper")} if iv.get("estimate") is not None
            else None,
            "accept_len": r.get("accept_len"), "by_position": r.get("accept_by_position")}


def measure(gate_part, args, url, name, cases, objective, bar, ends_at, report_only=False):
    """The launch's outcome: the objective case first, on a fixed sample of the most requests the
    gate would measure (--objective-requests), stopped there under ``bar``; then the plan's other
    cases; capacity judged on both runs (``gate_part``: the setting's plan's, its options and
    promise, and the host's known answers, as the gate asks them). Every run ends by ``ends_at``
    (seconds since the epoch, the budget's end; None: none): an outcome the budget ended is
    ``cut``, not failed."""
    common = gate.common_options(gate_part, url, args.api_key, None)
    common["ends_at"] = ends_at
    promise, known = gate_part["promise"], gate.given_answers(args, gate_part)
    first = []
    for c in cases:
        if c["case"] == objective:
            n = args.objective_requests or c["options"]["max_requests"]
            first.append(dict(c, options=dict(c["options"], requests=n, max_requests=n)))
    # a finalist runs the report-only cases too (thinking, prose: drafts are accepted far less
    # inside reasoning), shown in tune.md, never judged
    rest = [c for c in cases if c["case"] != objective and (report_only or not c.get("report_only"))]
    results = [plan.run_cases(common, first, name, promise=promise, answers=known)]
    if past(ends_at) and not results[0].get("passed"):
        return {"started": True, "cut": "budget", "error": "%s during case %s" % (CUT, objective)}, results
    out = dict(objective_figures(results[0], objective), started=True)
    out["capacity"] = results[0]["capacity"]["figures"]
    iv = tune.interval(out)
    if iv is not None and iv[2] < bar:
        out.update(stopped="slower", passed=False, failed_cases=[])
        return out, results
    if rest:
        if not past(ends_at):
            results.append(plan.run_cases(common, rest, name, promise=promise, answers=known))
        if past(ends_at) and (len(results) == 1 or not results[-1].get("passed")):  # not run, or cut
            return dict(out, cut="budget", error="%s in cases %s" % (
                CUT, ", ".join(c["case"] for c in rest))), results
    failed = []
    for res in results:
        failed += [c for c in res.get("failed_cases") or [] if c not in failed]
    out["failed_cases"] = failed
    out["passed"] = all(res.get("passed") for res in results)
    # short of capacity: a higher fraction may pass (its other failures may be the capacity's: a
    # concurrent case run on fewer requests at once than it needs)
    out["failed_capacity"] = "capacity" in failed
    out["failure"] = "; ".join(verdict.failure_message(res) for res in results if not res.get("passed"))
    return out, results


def run_identity(host, args, space, cases):
    """What a run's launches are measurements of: the host, its profile, the release and engine
    version its candidates run (the deploy plan's), its GPUs' fingerprint where their nvidia-smi
    is read (fingerprint.GPU_FIELDS: model, driver, power limits, max clocks, PCIe link), the
    space, the plan's cases and the objective. An interrupted run resumes only from launches of
    the same identity."""
    release = (host.planned(host.current_key(), 30000) or {}).get("release") or {}
    url = args.url or "http://%s:%d" % (args.address, args.port or 30000)
    run, smi, _ = gate.host_nvidia_smi(argparse.Namespace(url=url, nvidia_smi=args.nvidia_smi))
    gpus = fingerprint.take(run, smi, {}).get("gpus") if smi else None
    static = [f[1] for f in fingerprint.GPU_FIELDS]
    return json.loads(json.dumps({
        "gpus": [{k: g.get(k) for k in static} for g in gpus] if gpus else None,
        "host": args.host or ",".join(args.vars or ()), "profile": host.current,
        "engine": release.get("engine"), "version": release.get("version"), "release": release.get("name"),
        "space": space, "objective": args.objective, "objective_requests": args.objective_requests,
        "cases": [{k: c[k] for k in ("case", "options", "thresholds")} for c in cases]}, default=str))


def resumed(path, identity):
    """The launches of an interrupted run at ``path`` (its tune.json, written after each launch
    with ``complete: false``) of the same identity, less any the budget cut (they measured
    nothing); [] for a complete run, another identity, or none."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict) or data.get("complete") is not False or data.get("identity") != identity:
        return []
    return [dict(r, resumed=True) for r in data.get("launches") or []
            if isinstance(r, dict) and isinstance(r.get("outcome"), dict) and not r["outcome"].get("cut")]


# ------------------------------------------------------------------------------- output ------
def add_parser(sub):
    p = sub.add_parser("tune", help="find the fastest setting that passes the gate within a launch budget",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--launch", action="append", metavar="[ENGINE=]COMMAND",
                   help="starts one candidate: {args} its engine arguments, {port} its port (repeatable "
                        "with ENGINE= for a command per engine)")
    common.add_inventory_args(p, "with -i: the host whose settings, profiles and gate plan are tuned")
    p.add_argument("--vars", metavar="FILE", action="append",
                   help="vars files over the role defaults (without -i), or over the host's (with -i)")
    p.add_argument("--inputs", metavar="FILE",
                   help="the host's checked role inputs as a play planned them (JSON: the "
                        "sglang_deploy_plan action's inputs, playbooks/tasks/tune_host.yml), instead of "
                        "-i and --vars: nothing is read again")
    p.add_argument("--engines", help="engines to tune, comma-separated (default: the --space file's, "
                                     "else the host's engine)")
    p.add_argument("--space", metavar="FILE", help="YAML narrowing or widening the space (%s)"
                   % ", ".join(tune.SPACE_KEYS))
    p.add_argument("--profiles", metavar="NAME[,NAME...]",
                   help="instead of a space: these profiles of the host, each launched once as it stands "
                        "(the current profile first, listed or not), the answer as for a space")
    p.add_argument("--cases", metavar="FILE",
                   help="with --profiles: measure each listed profile once, in the order given (and no "
                        "other), on these cases without thresholds - JSON {\"cases\": [resolved cases], "
                        "\"options\": {engine options}, \"report\": {\"by\": \"plan\" or \"sweep\", "
                        "\"current\": NAME} or null}, playbooks/compare.yml's - write each plan result to "
                        "--results and, with a report, the comparison's (compare.md, .csv, .json, .png) "
                        "from them: no search")
    p.add_argument("--results", metavar="FILE",
                   help="with --cases: the results, [{profile, url, result, error, slowdowns}] "
                        "(default OUT/results.json)")
    p.add_argument("--check", action="store_true",
                   help="read and check everything (the host, the space or profiles, every setting's "
                        "preflight, the launch commands; with --url or --port, that the host's own server "
                        "answers there), launch nothing, exit 0")
    p.add_argument("--budget-launches", type=int, default=12, help="launches at most (default 12)")
    p.add_argument("--budget-minutes", type=float, help="wall minutes at most (never exceeded)")
    p.add_argument("--drafter-block", action="append", metavar="[PATH=]N",
                   help="the block the host's drafter (at PATH) was trained for, when this machine cannot "
                        "read its config.json: other blocks are refused, as the deploy refuses them")
    p.add_argument("--drafter-root", metavar="DIR",
                   help="a copy of the host's drafters' config.json files under their host paths "
                        "(playbooks/tune.yml fetches them there)")
    p.add_argument("--fresh", action="store_true",
                   help="start over: by default an interrupted run in --out DIR (its tune.json says "
                        "complete: false) of the same host, release, space and plan resumes without "
                        "relaunching what it measured")
    p.add_argument("--no-confirm", dest="confirm", action="store_false",
                   help="no second launch of the finalists (by default the winner, the runner-up and the "
                        "current profile are launched again at the end, up to 3 launches beyond "
                        "--budget-launches, within --budget-minutes; the verdict uses both launches)")
    p.add_argument("--objective", default="coding", help="the case whose C=1 decode tok/s is maximised")
    p.add_argument("--objective-requests", type=int,
                   help="the objective case's fixed sample (default: its max_requests, the most the gate "
                        "measures: the intervals that decide ties)")
    p.add_argument("--api-key", default=os.environ.get("SGLANG_API_KEY"),
                   help="the candidates' API key (default: $SGLANG_API_KEY, else the host's)")
    p.add_argument("--stop", metavar="COMMAND",
                   help="run after each launch's own group is stopped, to stop what it started elsewhere "
                        "(e.g. a transient unit on the host); {port}, {args} as in --launch; must exit 0")
    gate.add_nvidia_smi_arg(p, "each launch's clocks (the clock-event counters at its start and end, or the "
                               "active reasons sampled where the driver has none) and the run's identity")
    p.add_argument("--address", default="127.0.0.1",
                   help="where the candidates are reached (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="every candidate's port (default: a free one each); the host's "
                                            "own when its service is stopped for the tuning")
    p.add_argument("--url", help="where the candidates are measured (default http://ADDRESS:PORT; a port "
                                 "forwarded elsewhere, e.g. a container's published port)")
    p.add_argument("--ready-timeout", type=float, help="seconds a candidate may take to be ready "
                                                      "(default: the host's sglang_ready_timeout)")
    p.add_argument("--out", metavar="DIR", help="the report's directory (default out/tune/<UTC time>)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_tune)


def cmd_tune(args):
    try:
        return _tune(args)
    except (TuneError, LaunchError, tune.SpaceError, ConfigError) as e:
        sys.stderr.write("bench tune: %s\n" % e)
        return EXIT_UNMEASURED


def _space(args, engine):
    """The space: --space's file over the default, --engines over both; the host's engine when
    neither names one."""
    data = None
    if args.space:
        import yaml
        try:
            data = yaml.safe_load(Path(args.space).read_text())
        except (OSError, yaml.YAMLError) as e:
            raise TuneError("cannot read --space %s: %s" % (args.space, e))
    wanted = [e.strip() for e in args.engines.split(",") if e.strip()] if args.engines else None
    if not wanted and not (isinstance(data, dict) and "engines" in data):
        wanted = [engine]
    return tune.space_of(data, wanted)


def _out_dir(args):
    """--out, else out/tune/<UTC time>; made."""
    stamp = datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")
    out_dir = Path(args.out) if args.out else DEFAULT_OUT / stamp
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def _say(args):
    """A line of progress on stderr, none with --quiet."""
    return (lambda text: None) if args.quiet else (lambda text: sys.stderr.write(text + "\n"))


def _given_cases(path):
    """--cases FILE: {"cases": [resolved cases], "options": {engine options}, "report": the
    comparison's report to write or null (compare_plan.reporter)}; TuneError naming what is
    wrong."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TuneError("cannot read --cases %s: %s" % (path, e))
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list) or not data["cases"] \
            or not all(isinstance(c, dict) and c.get("case") for c in data["cases"]) \
            or not isinstance(data.get("options", {}), dict):
        raise TuneError("--cases %s must be {\"cases\": [resolved cases, each with its case name], "
                        "\"options\": {engine options}}" % path)
    given = {"cases": data["cases"], "options": data.get("options") or {}, "report": data.get("report")}
    report = given["report"]
    if report is not None and not (isinstance(report, dict) and report.get("by") in ("plan", "sweep")
                                   and isinstance(report.get("current"), (str, type(None)))):
        raise TuneError("--cases %s: report must be {\"by\": \"plan\" or \"sweep\", \"current\": "
                        "NAME or null} (the comparison's report to write), got %r" % (path, report))
    try:  # every case and option checked as a run checks them, before anything is launched
        plan.case_configs(dict(given["options"], url="http://127.0.0.1:1"), given["cases"], "--cases")
        config.validate(dict(given["options"], url="http://127.0.0.1:1"))
    except ConfigError as e:
        raise TuneError("--cases %s: invalid %s: %s" % (path, e.option, e.message))
    return given


def _each(host, args, keys, commands, given, started, write_report=None):
    """--cases: each listed profile launched once in the order given, measured on every case
    without thresholds (plan.run_cases, the comparison's cases and options), stopped; the plan
    results written to --results as compare-report reads them ([{profile, url, result, error,
    slowdowns}]: the error a launch's that did not start or could not be measured, the slowdowns
    what held its GPUs' clocks down while measured), then the comparison's report from them
    (``write_report``, compare_plan.reporter) when the file asks for one. 0, or 2 when a launch
    was not stopped cleanly (the rest are not launched: it would hold their GPUs) or nothing was
    measured for the report."""
    ends_at = started + args.budget_minutes * 60 if args.budget_minutes else None
    ready_timeout = args.ready_timeout or float(host.v.get("sglang_ready_timeout") or 900)
    out_dir, say = _out_dir(args), _say(args)

    def measured(gate_part, url, name):
        options = dict(given["options"], url=url, api_key=args.api_key, model=None, ends_at=ends_at)
        try:  # the host's known answers, as its gate asks them
            known = gate.given_answers(args, gate_part)
            result = plan.run_cases(options, given["cases"], name, answers=known)
        except ConfigError as e:
            return {"started": True, "passed": False, "error": "invalid %s: %s" % (e.option, e.message)}, []
        return {"started": True, "passed": bool(result.get("passed"))}, [result]
    results, stopped, stray = [], None, False
    for i, key in enumerate(keys, 1):
        if stopped:
            results.append({"profile": key.profile, "url": None, "result": None, "error": stopped})
            continue
        log = out_dir / "launches" / ("%02d-%s.log" % (i, key.profile))
        record = run_one(host, args, key, commands[key.engine], ready_timeout, ends_at, log, measured,
                         keep=None)
        o = record["outcome"]
        result = (record.get("results") or [None])[0]
        # a launch that did not start or died measured says why (beside what it measured)
        error = (o.get("error") or o.get("failure")) if result is None or o.get("failure") else None
        # what held the GPUs' clocks down while it was measured (the report names it)
        results.append({"profile": key.profile, "url": record.get("url"), "result": result,
                        "error": error or (None if result else "no result"),
                        "slowdowns": record.get("slowdowns") or []})
        say("%d/%d %s: %s" % (i, len(keys), key.profile,
                              "measured" if result else "not measured: %s" % results[-1]["error"]))
        if record.get("stray"):  # it would hold the next one's GPUs
            stray, stopped = True, "not launched: launch %s was not stopped cleanly (%s)" % (
                key.profile, record["stray"])
        elif o.get("failure") == "port":  # every launch would meet it
            stopped = "not launched: %s" % o["error"]
    path = Path(args.results) if args.results else out_dir / "results.json"
    common.replace_text(path, json.dumps(results, indent=2, default=str) + "\n")
    say("bench tune: wrote %s" % path)
    if write_report is not None:
        try:
            write_report(results, out_dir)
        except compare.InputError as e:
            raise TuneError("the comparison's report: %s (the results: %s)" % (e, path))
    return EXIT_UNMEASURED if stray else EXIT_PASSED


def _tune(args):
    started = time.time()  # --budget-minutes counts from here
    if args.budget_launches < 1:
        raise TuneError("--budget-launches must be 1 or more, got %d" % args.budget_launches)
    if args.port is not None and not 0 < args.port < 65536:
        raise TuneError("--port must be a port number, got %d" % args.port)
    if args.objective_requests is not None and args.objective_requests < 2:
        raise TuneError("--objective-requests must be 2 or more, got %d" % args.objective_requests)
    if args.budget_minutes is not None and args.budget_minutes <= 0:
        raise TuneError("--budget-minutes must be above 0, got %g" % args.budget_minutes)
    if args.cases and not args.profiles:
        raise TuneError("--cases measures the profiles --profiles names: give --profiles")
    given = _given_cases(args.cases) if args.cases else None
    host = Host(args)
    if args.profiles:  # the host's own profiles, each launched as it stands (setting.Named)
        if args.space or args.engines:
            raise TuneError("--profiles names the settings: not with --space or --engines")
        listed = host.listed(args.profiles, current_first=given is None)
        current, space = listed[0], {"profiles": [k.profile for k in listed]}
        engines_run = {k.engine for k in listed}
    else:
        listed, current = None, host.current_key()
        space = _space(args, current[0])
        engines_run = set(space["engines"]) | {current[0]}
    try:
        commands = launch_commands(args.launch, sorted(engines_run))
    except LaunchError as e:
        if not listed:
            raise
        raise TuneError("%s; --profiles: %s" % (e, ", ".join(
            "%s runs on %s" % (k.profile, k.engine) for k in listed)))
    try:  # every candidate, the current profile too, measured against the service bars
        cases = given["cases"] if given else plan.resolve(
            host.v.get("sglang_gate_plan"), {host.current: host.service_bars()}, host.current)
    except ConfigError as e:
        raise TuneError("the host's gate plan: %s" % e.message)
    if not given and args.objective not in [c["case"] for c in cases]:
        raise TuneError("--objective %s is not a case of the host's gate plan (%s)"
                        % (args.objective, ", ".join(c["case"] for c in cases)))
    keys = listed or tune.candidates(space, host.drafter_engines())
    if current not in keys and not given:
        keys.append(current)
    host.measure_only = given is not None
    _, problems, _ = host.render(host.current_key() if given else current, 30000)
    if problems:
        raise TuneError("the host's own profile %s is refused by the deploy's preflight: %s"
                        % (host.current, "; ".join(problems)))
    refused, untrained, releases = {}, {}, {}
    blocks = host.drafter_blocks(args.drafter_block, args.drafter_root)
    for key in keys:
        _, problems, planned = host.render(key, 30000)
        if problems:
            refused[key] = "; ".join(problems)
            continue
        release = planned["release"]
        releases.setdefault(release["name"], {k: release.get(k) for k in (
            "name", "engine", "version", "dir", "venv", "launch_module")})
        if key.kind == "block":
            path = host.setting(key)[2].get(drafter.SETTING)
            if drafter.block_note(path, blocks.get(path), key.depth):
                untrained.setdefault((path, blocks[path]), set()).add(key.depth)
    if listed and refused:  # a profile named to be measured that cannot run: the user's to mend
        raise TuneError("--profiles: the deploy's preflight refuses %s" % "; ".join(
            "%s: %s" % (k.profile, why) for k, why in refused.items()))
    write_report = None
    if given and given["report"]:  # the comparison's report: whatever it needs checked before a launch
        own = given["report"].get("current")
        if own is not None and own not in [k.profile for k in keys]:
            raise TuneError("--cases: the report's current profile %s is not one of --profiles (%s)"
                            % (own, ", ".join(k.profile for k in keys)))
        try:
            write_report = compare_plan.reporter(host.host, given["report"], given["cases"])
        except compare.InputError as e:
            raise TuneError("--cases: %s" % e)
    if args.check:  # everything above, nothing launched: the play's check before the service stops
        if args.url or args.port:  # where the candidates will be measured: the host's own server there now
            url = (args.url or "http://%s:%d" % (args.address, args.port)).rstrip("/")
            if not port_taken(url):
                raise TuneError(
                    "nothing answers at %s, where the candidates would be measured: the host's own server "
                    "should, before it is stopped for them. From here the host's port is out of reach (a "
                    "server bound to its loopback, sglang_host, or a firewall): set tune_url, and "
                    "tune_runner_prefix for where the tuner must run to reach it (playbooks/vars/"
                    "candidates.yml), or start the host's server first" % url)
        sys.stderr.write("bench tune: %d settings to search (%d refused by the preflight), launches at most "
                         "%d; releases %s; nothing launched (--check)\n" % (
                             len(keys) - len(refused), len(refused), args.budget_launches,
                             ", ".join(sorted(releases))))
        # what the play reads: the releases the candidates run from (each must be on the host)
        print(json.dumps({"settings": len(keys), "refused": len(refused),
                          "releases": sorted(releases.values(), key=lambda r: r["name"])}))
        return EXIT_PASSED
    if given:
        return _each(host, args, keys, commands, given, started, write_report)
    # what the capacity check holds a setting to: the promised context (or a longer case's), the
    # plan's highest concurrency
    needs = (max([host.profiles[host.current].get("context_length") or 0]
                 + [c["options"]["prompt_tokens"] + c["options"]["max_tokens"]
                    for c in cases if c["options"]["prompts"] == "long_context"]) or None,
             max(c["options"]["concurrency"] for c in cases))
    tuner = tune.Tuner(keys, current, refused=refused, capacity_model=host.capacity_model, needs=needs,
                       budget=args.budget_launches)
    for (path, trained), sizes in sorted(untrained.items()):
        tuner.observations.append(drafter.block_note(path, trained, sizes, "the space"))
    out_dir = _out_dir(args)
    # one absolute end for every wait of the run (readiness, warmup, each case); the launch it
    # cuts is then stopped: the run ends within the budget plus one stop
    ends_at = started + args.budget_minutes * 60 if args.budget_minutes else None
    ready_timeout = args.ready_timeout or float(host.v.get("sglang_ready_timeout") or 900)
    identity = run_identity(host, args, space, cases)
    records = [] if args.fresh else resumed(out_dir / "tune.json", identity)
    durations = [r["seconds"] for r in records if r.get("seconds")]
    for r in records:
        tuner.record(tuple(r["key"]), r["outcome"])
    done_final = [tuple(r["key"]) for r in records if r.get("phase") == "finalists"]
    say = _say(args)
    say("tune %s: %d settings, %d refused by the preflight; budget %d launches%s%s"
        % (host.current, len(keys), len(refused), args.budget_launches,
           ", %g min" % args.budget_minutes if args.budget_minutes else "",
           "; resumed with the %d launches of %s" % (len(records), out_dir / "tune.json") if records else ""))
    phase, finalists = ("finalists" if done_final else "search"), []
    if done_final:  # an interrupted run's finalists: those not launched yet
        finalists = [k for k in (tuner.finalists() if args.confirm else []) if k not in done_final]
    while True:
        key = tuner.next() if phase == "search" else None
        if key is None and phase == "search":
            # the finalists again, the current profile last: the verdict uses both launches of each
            phase, finalists = "finalists", (tuner.finalists() if args.confirm else [])
        if phase == "finalists":
            key = finalists.pop(0) if finalists else None
        if key is None:
            break
        left = None if ends_at is None else ends_at - time.time()
        if left is not None and (left <= 0 or (durations and max(durations) > left)):
            tuner.notes.append("the budget (--budget-minutes %g) ended with %d launch%s left%s" % (
                args.budget_minutes, tuner.left(), "" if tuner.left() == 1 else "es",
                ": %.0f s were left, the longest launch took %.0f s" % (left, max(durations))
                if left > 0 else ""))
            break
        t0 = time.monotonic()
        final = phase == "finalists"
        log = out_dir / "launches" / ("%02d-%s.log" % (len(records) + 1, setting.key_name(key)))
        bar = 0.0 if final else tuner.bar()  # a finalist runs every case, never stopped as slower

        def measured(gate_part, url, name, bar=bar, final=final):
            return measure(gate_part, args, url, name, cases, args.objective, bar, ends_at, report_only=final)
        record = run_one(host, args, key, commands[key.engine], ready_timeout, ends_at, log, measured)
        record["phase"] = phase
        durations.append(time.monotonic() - t0)
        tuner.record(key, record["outcome"])
        records.append(record)
        # what an interrupted run resumes from (the report rewrites it whole at the end)
        common.replace_text(out_dir / "tune.json", json.dumps(
            {"complete": False, "identity": identity, "launches": records}, indent=2, default=str) + "\n")
        lead = tuner.leader()
        say("[%s] %2d/%d %-44s %s | best %s | %d launch%s left"
            % (_bar(len(records), args.budget_launches), len(records), args.budget_launches,
               setting.key_label(key), _short(record["outcome"]),
               "%s %.1f tok/s" % (setting.key_label(lead), tune.interval(tuner.passed()[lead])[0])
               if lead else "-",
               tuner.left(), "" if tuner.left() == 1 else "es"))
        if record["outcome"].get("failure") == "port":  # every launch would meet it: stop here
            tuner.notes.append("stopped: %s" % record["outcome"]["error"])
            break
        if record.get("stray"):  # a candidate that would hold the GPUs under the next: stop here
            tuner.notes.append("stopped: launch %s was not stopped cleanly (%s)"
                               % (setting.key_name(key), record["stray"]))
            break
    report = tune_report.write(out_dir, host, tuner, records, cases, args, time.time() - started,
                               identity=identity)
    print(report["headline"])
    say("bench tune: wrote %s" % out_dir)
    stray = [r for r in records if r.get("stray")]
    if stray:
        sys.stderr.write("bench tune: launch %s was not stopped cleanly: %s\n"
                         % (stray[0]["name"], stray[0]["stray"]))
        return EXIT_UNMEASURED
    return EXIT_PASSED if report["answer"]["winner"] else EXIT_FAILED


def _bar(done, total, width=12):
    filled = int(round(width * done / float(max(total, 1))))
    return "#" * filled + "." * (width - filled)


def _short(o):
    if o.get("cut"):
        return CUT
    if not o.get("started", True):
        return "did not start"
    iv = tune.interval(o)
    fig = "%.1f tok/s" % iv[0] if iv else "-"
    if o.get("stopped"):
        return fig + " (slower, stopped)"
    return fig + (" passed" if o.get("passed") else " failed %s" % ",".join(o.get("failed_cases") or ()))
