"""``python -m bench gate``: run against any server the exact plan the sglang_gate role would run.

    python -m bench gate -i INVENTORY --host NAME [--vault-password-file FILE] [--vars FILE ...]
        [--url URL] [--profile NAME] [--json FILE]
    python -m bench gate --url URL [--vars FILE ...] [--profile NAME] [--json FILE]

The plan is the deploy's, made by the one planner (bench/planner.py): with ``-i INVENTORY --host
NAME`` the host's variables as ansible-playbook sees them (the role defaults, the inventory's
group_vars and host_vars, so a host_vars sglang_gate_calibrated written by playbooks/calibrate.yml
counts), the --vars files on top as ``-e @FILE``; the URL is the host's (ansible_host, sglang_port)
unless --url is given. Without ``-i`` a host of no inventory: the role defaults under the --vars
files (by default the production inventory's group_vars). The plan's gate part (its resolved
cases, options, promise and notes) runs through plugins/module_utils/sglang_perf/plan/gate.py, the
code the role's module runs on the host.

Exit status: 0 the gate passed, 1 it failed (a case or the capacity), 2 the server could not be
measured (bad variables, unreachable, auth), each with a one-line reason on stderr.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from sglang_perf.measure import answers
from sglang_perf.judge import calibration, decision, verdict
from sglang_perf.record import fingerprint, history
from sglang_perf.plan import inherit, gate as plan
from sglang_perf.measure.client import ConfigError, MeasureError

from bench import common
from bench.common import EXIT_FAILED, EXIT_PASSED, EXIT_UNMEASURED, PlanError, progress_printer
from bench.paths import ROOT

DEFAULT_VARS = (ROOT / "inventories" / "production" / "group_vars" / "sglang_servers",)
# without -i: the host the plan is made for (a host of no inventory)
STANDALONE = "localhost"


def host_of(args):
    """The planner's Host of the command (bench/planner.py): with -i the host's variables as
    ansible-playbook sees them, the --vars files on top as ``-e @FILE``; without -i a host of no
    inventory with the role defaults under the --vars files (default DEFAULT_VARS). Sets args.url
    (the host's server) and args.api_key (its sglang_api_key) when -i is given and they are not.
    PlanError names what cannot be read or checked."""
    from bench import planner  # Ansible's: `bench run` without -i works on a bare Python
    if getattr(args, "inputs", None):  # the checked inputs a play wrote (compare-report)
        return inputs_host(args, STANDALONE)
    if getattr(args, "inventory", None):
        if not args.host:
            raise PlanError("-i %s needs --host NAME (the inventory host whose variables to use)"
                            % args.inventory)
        h = planner.host_for(args.inventory, args.host, vars_files=args.vars or (),
                             vault_password_file=args.vault_password_file)
        h.values()
        if hasattr(args, "url") and not args.url:
            args.url = h.url()
        if hasattr(args, "api_key") and not args.api_key:
            args.api_key = h.api_key()
        return h
    if getattr(args, "vault_password_file", None):
        raise PlanError("--vault-password-file reads an inventory's vaulted files: "
                        "give -i INVENTORY --host NAME")
    h = planner.host_for(None, STANDALONE, vars_files=args.vars or DEFAULT_VARS)
    h.values()
    return h


def inputs_host(args, name, extra=None):
    """The Host of --inputs (the checked inputs a play wrote; ``name`` without --host), with
    ``extra`` checked inputs on top; PlanError when -i or --vars is given beside it."""
    from bench import planner
    if getattr(args, "inventory", None) or args.vars:
        raise PlanError("--inputs holds the host's inputs already: give it without -i or --vars")
    return planner.read_inputs(args.inputs, args.host or name, extra=extra)


def vars_of(args):
    """The roles' inputs of the command's host (host_of's), profiles and thresholds inherited."""
    return flat(host_of(args).values())


def plan_of(args, host=None, **overrides):
    """The deploy plan of the command's host (a unit rendered for review: the gate's part is what
    the role's sglang_bench runs) with --profile as its sglang_profile; PlanError names its problems."""
    host = host or host_of(args)
    if getattr(args, "profile", None):
        overrides["sglang_profile"] = args.profile
    return host.planned(**overrides)


def flat(v):
    """``v`` with its profiles and thresholds inherited and drafters placed (inherit.resolve, as
    the deploy plan reads them); PlanError naming what does not resolve."""
    profiles, thresholds, problems = inherit.of_vars(v)
    if problems:
        raise PlanError("; ".join(problems))
    return dict(v, sglang_profiles=profiles, sglang_gate_thresholds=thresholds)


def need_url(args):
    if not args.url:
        raise PlanError("no server: give --url URL, or -i INVENTORY --host NAME for the host's own")


def role_case(name="coding"):
    """The options of case ``name`` of the role defaults' own plan (a host of no inventory and no
    vars: what `bench run` measures by default), as the gate resolves them."""
    from bench import planner
    p = planner.host_for(None, STANDALONE).planned()
    return next(c["options"] for c in p["gate"]["cases"] if c["case"] == name)


def common_options(gate, url, api_key, model):
    """The engine's options of a plan's gate part (its ``options``) against ``url``."""
    return dict(gate["options"], url=url, api_key=api_key, model=model)


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def host_nvidia_smi(args):
    """The nvidia-smi of the machine the server runs on, as (run, program, why none): ``run(argv)``
    asks it (fingerprint.run_argv's shape) and ``program`` is its path there. This machine's when
    the URL is on loopback (--nvidia-smi auto) or --nvidia-smi names one program; a command of
    several words runs its last word, the program, through the words before it on another
    machine (e.g. ``ssh -o BatchMode=yes root@ct129 nvidia-smi``, ``podman exec NAME nvidia-smi``:
    playbooks/tune.yml's tune_exec); program None for a server elsewhere, or when the command's
    first word is not found here."""
    import shlex
    import shutil
    name = getattr(args, "nvidia_smi", "auto")
    if name == "auto":
        if urlsplit(args.url).hostname not in LOOPBACK:
            return fingerprint.run_argv, None, \
                "the server is not on this machine: no GPU figures (--nvidia-smi CMD asks one)"
        name = "nvidia-smi"
    words = shlex.split(name) if name else []
    if len(words) > 1:  # the program on another machine, asked through the words before it
        if not shutil.which(words[0]):
            return fingerprint.run_argv, None, "%s: not found (no GPU figures)" % words[0]
        return _through(words[:-1]), words[-1], None
    path = shutil.which(name) if name else None
    return fingerprint.run_argv, path, "%s: not found (no GPU figures)" % name if name else None


def _through(prefix):
    """fingerprint.run_argv with ``prefix`` before the argv. nvidia-smi's arguments here are words
    a shell leaves as they are, so they pass alike through a remote shell (ssh) and none (podman
    exec); OSError for one that is not. A terminal's line ends (ssh -tt) parse as plain ones."""
    import shlex

    def run(argv):
        odd = [a for a in argv if shlex.quote(a) != a]
        if odd:
            raise OSError("cannot pass %s through %s unchanged" % (odd, " ".join(prefix)))
        return fingerprint.run_argv(list(prefix) + list(argv))
    return run


def add_nvidia_smi_arg(p, what):
    """--nvidia-smi CMD, read by host_nvidia_smi: what its answers make (``what``)."""
    p.add_argument("--nvidia-smi", default="auto", metavar="CMD",
                   help="the nvidia-smi of the server's GPUs, for %s (auto: this machine's when the URL is "
                        "on loopback, else none; a command of several words asks the program, its last "
                        "word, through the others: 'ssh HOST nvidia-smi'; '' none)" % what)


def host_fingerprint(args, identity):
    """The fingerprint of the machine the server runs on (host_nvidia_smi's) with ``identity``
    ({profile, profile_sha256}), and a watch on its clocks started with it (fingerprint.watch;
    run_cases stops it)."""
    run, path, missing = host_nvidia_smi(args)
    fp = fingerprint.take(run, path, identity, missing=missing)
    return fp, fingerprint.watch(run, path)


def given_answers(args, gate):
    """The known answers the quality checks ask: --answers FILE, else the plan's (its
    sglang_gate_answers, read and checked by the plan), parsed (answers.parse) with where they
    came from; None for the built-in set. ConfigError names the option and the bad rows."""
    if getattr(args, "answers", None):
        return answers.read(str(Path(args.answers).resolve()), "--answers")
    if gate.get("answers"):
        return answers.read(gate["answers"]["path"], "sglang_gate_answers")
    return None


def run_plan(args, gate, cases=None, profile=None, promise=None, identity=None, **kw):
    """A plan's gate part (its resolved ``cases``, or the given ones, e.g. measure-only) run
    against ``args.url`` as the role's sglang_bench runs it, progress lines on stderr unless
    --quiet. ``profile``, ``promise`` and ``identity`` default to the plan's own."""
    progress = None if args.quiet else progress_printer(sys.stderr)
    common = common_options(gate, args.url, args.api_key, args.model)
    identity = identity or {k: gate["identity"][k] for k in ("profile", "profile_sha256")}
    profile = profile or identity["profile"]
    extra = dict(promise=promise or gate["promise"], progress=progress, answers=given_answers(args, gate),
                 notes=gate["notes"] if cases is None else (), **kw)
    try:
        extra["fingerprint"], extra["clocks"] = host_fingerprint(args, identity)
        return plan.run_cases(common, gate["cases"] if cases is None else cases, profile, **extra)
    finally:
        if progress is not None:
            progress.close()


def guarded(name, fn, args):
    """``fn(args)``, with every reason the server could not be measured as exit 2."""
    try:
        return fn(args)
    except (PlanError, OSError) as e:
        sys.stderr.write("bench %s: %s\n" % (name, e))
    except ConfigError as e:
        sys.stderr.write("bench %s: invalid %s: %s\n" % (name, e.option, e.message))
    except MeasureError as e:
        sys.stderr.write("bench %s: could not measure %s: %s\n" % (name, args.url, e))
    return EXIT_UNMEASURED


def add_parser(sub):
    p = sub.add_parser("gate", help="run the sglang_gate role's plan against a server",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="base URL, e.g. http://127.0.0.1:30000 (default with -i: the host's, "
                                 "http://ansible_host:sglang_port)")
    common.add_inventory_args(p, "with -i: the inventory host (its variables; the history record names it); "
                          "without: the host the history record names (default: the URL's host:port)")
    p.add_argument("--vars", metavar="FILE", action="append",
                   help="group_vars/host_vars file or group_vars directory over the role defaults, or "
                        "with -i over the host's variables (repeatable, later wins; default without -i: %s)"
                        % ", ".join(str(d.relative_to(ROOT)) for d in DEFAULT_VARS))
    p.add_argument("--profile", help="the profile the server runs (default: the vars' sglang_profile)")
    p.add_argument("--api-key", default=os.environ.get("SGLANG_API_KEY"),
                   help="API key (default: $SGLANG_API_KEY, else with -i the host's sglang_api_key; "
                        "prefer those, argv is public)")
    p.add_argument("--model", help="model name (default: the first one at /v1/models)")
    p.add_argument("--baseline-history", metavar="FILE",
                   help="a gate history (history/HOST.jsonl): compare each case with the newest "
                        "passing run of the profile")
    p.add_argument("--history", metavar="FILE",
                   help="append the run to FILE as one line of the role's gate history (the record the "
                        "sglang_gate role writes; `bench history FILE` reads it)")
    p.add_argument("--json", metavar="FILE", help="write the plan result as JSON")
    p.add_argument("--answers", metavar="FILE",
                   help="known answers for the quality checks, a JSONL file of {prompt, answer} or "
                        "{prompt, tools, call} rows replacing the built-in ones of their kind "
                        "(default: the vars' sglang_gate_answers, else the built-in set)")
    add_nvidia_smi_arg(p, "the host's fingerprint, and its clocks watched through the run")
    p.add_argument("--quiet", action="store_true", help="no per-request progress lines")
    p.set_defaults(func=cmd_gate)


def add_calibrate_parser(sub):
    p = sub.add_parser("calibrate", help="run the gate plan several times and propose thresholds",
                       description="Run the sglang_gate role's plan --runs times against a server and "
                                   "propose per-case thresholds --margin below the lowest figures "
                                   "(playbooks/calibrate.yml does the same through Ansible).")
    p.add_argument("--url", help="base URL (default with -i: the host's, http://ansible_host:sglang_port)")
    common.add_inventory_args(p, "with -i: the inventory host (its variables, its name in the comments); "
                          "without: the host name the comments give")
    p.add_argument("--vars", metavar="FILE", action="append", help="as for gate")
    p.add_argument("--profile", help="the profile the server runs (default: the vars' sglang_profile)")
    p.add_argument("--api-key", default=os.environ.get("SGLANG_API_KEY"),
                   help="default: $SGLANG_API_KEY, else with -i the host's sglang_api_key")
    p.add_argument("--model", help="model name (default: the first one at /v1/models)")
    p.add_argument("--runs", type=int, default=3, help="plan runs (default 3, at least 2)")
    p.add_argument("--margin", type=float, default=0.1, help="fraction below the lowest figure (default 0.1)")
    p.add_argument("--write", metavar="FILE", nargs="?", const="",
                   help="the host's vars file to write; its other profiles are kept, the diff is printed "
                        "(with -i and no FILE: <inventory dir>/host_vars/<host>/gate_calibration.yml, "
                        "where playbooks/calibrate.yml writes)")
    p.add_argument("--quiet", action="store_true", help="no per-request progress lines")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args):
    return guarded("calibrate", _calibrate, args)


def _calibrate(args):
    import datetime
    import difflib
    if args.runs < 2:
        raise PlanError("--runs must be 2 or more (a spread needs two runs), got %d" % args.runs)
    host = host_of(args)
    need_url(args)
    # measured as the gate measures, thresholds uncalibrated (calibration sets them)
    p = plan_of(args, host, sglang_gate_calibrated={})
    profile = p["profile"]
    if args.write == "":
        if not args.inventory:
            raise PlanError("--write without FILE writes the host's vars: give -i INVENTORY --host NAME")
        args.write = str(calibration_file(host))
    old, existing = "", None
    if args.write and Path(args.write).is_file():
        import yaml
        old = Path(args.write).read_text()
        existing = (yaml.safe_load(old) or {}).get("sglang_gate_calibrated")
    runs = []
    for i in range(args.runs):
        sys.stderr.write("calibrate: run %d of %d\n" % (i + 1, args.runs))
        runs.append(run_plan(args, p["gate"]))
        sys.stderr.write(verdict.table(runs[-1]) + "\n")
    proposals = calibration.propose(runs, args.margin)
    when = datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z"
    text = calibration.text(proposals, profile, args.margin, args.runs, args.host or "this server",
                            when, existing)
    if not args.write:
        print(text, end="")
        return EXIT_PASSED
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                               args.write + " (before)", args.write))
    Path(args.write).parent.mkdir(parents=True, exist_ok=True)
    Path(args.write).write_text(text)
    sys.stderr.write("bench calibrate: wrote %s\n" % args.write)
    return EXIT_PASSED


def cmd_gate(args):
    return guarded("gate", _gate, args)


def calibration_file(host):
    """Where playbooks/calibrate.yml writes the host's thresholds (its calibrate_file)."""
    return Path(host.vars["inventory_dir"]) / "host_vars" / host.name / "gate_calibration.yml"


def _gate(args):
    host = host_of(args)
    need_url(args)
    p = plan_of(args, host)
    profile = p["profile"]
    baseline = None
    if args.baseline_history:
        baseline = history.last_known_good(history.read(args.baseline_history), profile)
    if not args.quiet:
        sys.stderr.write("gate plan for profile %s against %s: %s\n" % (
            profile, args.url, ", ".join(c["case"] for c in p["gate"]["cases"])))
    result = run_plan(args, p["gate"], baseline=baseline)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    if args.history:
        append_history(args.history, result, profile, args.host or urlsplit(args.url).netloc)
    print(verdict.table(result))
    if result["passed"]:
        return EXIT_PASSED
    sys.stderr.write("bench gate: %s\n" % verdict.failure_message(result))
    return EXIT_FAILED


def append_history(path, result, profile, host):
    """The run as the role's history record (sglang_perf/record/history.py record()), appended as one
    JSON line: a gate run the CLI made, so its action is nothing (no unit was deployed)."""
    import datetime
    verdict = decision.PASS if result["passed"] else decision.FAIL
    server = result.get("server") or {}
    context = {"time": datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z", "host": host,
               "profile": profile, "sglang_version": server.get("version"), "engine": server.get("kind"),
               "release": None, "source": "python -m bench gate"}
    rec = history.record(result, {"verdict": verdict, "action": decision.NOTHING,
                                  "reason": "measured by python -m bench gate: nothing deployed or restored"},
                         context)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(rec, sort_keys=True) + "\n")
