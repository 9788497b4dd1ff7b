"""``python -m bench gate``: run against any server the exact plan the sglang_gate role would run.

    python -m bench gate -i INVENTORY --host NAME [--vault-password-file FILE] [--vars FILE ...]
        [--url URL] [--profile NAME] [--json FILE]
    python -m bench gate --url URL [--vars FILE ...] [--profile NAME] [--json FILE]

With ``-i INVENTORY --host NAME`` the variables are the host's as ansible-playbook sees them
(bench/hostvars.py: the role defaults, the inventory's group_vars and host_vars, so a
host_vars sglang_gate_calibrated written by playbooks/calibrate.yml counts), the --vars files
on top as ``-e @FILE``; the URL is the host's (ansible_host, sglang_port) unless --url is given.
Without ``-i`` they are the role defaults (roles/sglang_gate, and roles/sglang for the profiles)
overlaid by the given group_vars / host_vars files in order (a later file replaces a variable as
a whole); by default the production inventory's group_vars. The plan runs through
plugins/module_utils/sglang_perf/plan.py, the code the role's module runs on the host.

Exit status: 0 the gate passed, 1 it failed (a case or the capacity), 2 the server could not be
measured (bad variables, unreachable, auth), each with a one-line reason on stderr.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from sglang_perf import answers, calibration, decision, fingerprint, history, inherit, plan, verdict
from sglang_perf.client import ConfigError, MeasureError

from bench.common import EXIT_FAILED, EXIT_PASSED, EXIT_UNMEASURED, progress_printer
from bench.paths import ROOT, SGLANG_DEFAULTS

ROLE_DEFAULTS = (SGLANG_DEFAULTS, ROOT / "roles" / "sglang_gate" / "defaults" / "main.yml")
DEFAULT_VARS = (ROOT / "inventories" / "production" / "group_vars" / "sglang_servers",)
# the variables the plan needs
NEEDED = ("sglang_gate_plan", "sglang_gate_thresholds", "sglang_gate_calibrated", "sglang_gate_api",
          "sglang_gate_answers",
          "sglang_gate_confidence", "sglang_gate_inconclusive", "sglang_gate_warmup",
          "sglang_gate_first_token_timeout", "sglang_gate_stall_timeout",
          "sglang_gate_run_timeout", "sglang_gate_max_regression_pct", "sglang_profiles", "sglang_profile",
          "sglang_host_profiles", "sglang_gate_host_thresholds")
# with -i: what names the host and where its server and its inventory are
HOST_KEYS = ("inventory_hostname", "inventory_dir", "ansible_host", "sglang_port")


class VarsError(ValueError):
    pass


def _files(path):
    path = Path(path)
    if path.is_dir():  # a group_vars/<group>/ directory: its YAML files, not the vault
        return sorted(p for p in path.iterdir() if p.suffix in (".yml", ".yaml") and "vault" not in p.name)
    if not path.is_file():
        raise VarsError("no vars file %s" % path)
    return [path]


def _templated(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def _template(files, merged, origin, names):
    """``names`` of ``merged`` templated by Ansible over every variable of ``files``."""
    try:
        from bench import hostvars
    except ImportError:  # a Python without Ansible
        name = names[0]
        raise VarsError("%s in %s is templated (%r): give it literally, or run with Ansible installed"
                        % (name, origin[name], merged[name]))
    dl = hostvars.loader()
    try:
        variables = {}
        for f in files:
            variables.update(hostvars.load(dl, f))
    except hostvars.HostVarsError as e:
        raise VarsError(str(e))
    out = {}
    for name in names:
        try:
            out.update(hostvars.resolve(dl, variables, [name]))
        except hostvars.HostVarsError as e:
            raise VarsError("%s in %s is templated (%r) and %s"
                            % (name, origin[name], merged[name], str(e).split(" ", 1)[1]))
    return out


def load_vars(paths=None, extra=()):
    """The role defaults overlaid by ``paths`` (files or group_vars directories), top-level
    replace like Ansible; only the variables the plan needs (and ``extra``), templated by Ansible.
    Raises VarsError naming the file."""
    import yaml
    needed = NEEDED + tuple(extra)
    merged, origin = {}, {}
    files = list(ROLE_DEFAULTS) + [f for p in (paths or DEFAULT_VARS) for f in _files(p)]
    for path in files:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise VarsError("cannot read %s: %s" % (path, e))
        if not isinstance(data, dict):
            raise VarsError("%s is not a mapping of variables" % path)
        for key in needed:
            if key in data:
                merged[key], origin[key] = data[key], path
    templated = [k for k in needed if k in merged and _templated(merged[k])]
    if templated:
        merged.update(_template(files, merged, origin, templated))
    return merged, origin


def host_vars(args, extra=()):
    """The variables of ``args.host`` of the inventory ``args.inventory`` as ansible-playbook sees
    them (bench/hostvars.py), the --vars files on top: the plan's (and ``extra``) and HOST_KEYS,
    templated; ``sglang_api_key`` too when it can be (None when not, e.g. a skipped vault)."""
    from bench import hostvars
    if not args.host:
        raise VarsError("-i %s needs --host NAME (the inventory host whose variables to use)"
                        % args.inventory)
    try:
        dl, variables = hostvars.task_vars(args.inventory, args.host, vars_files=args.vars or (),
                                           vault_password_file=args.vault_password_file)
        v = hostvars.resolve(dl, variables, NEEDED + tuple(extra) + HOST_KEYS,
                             where=" (host %s of %s)" % (args.host, args.inventory))
    except hostvars.HostVarsError as e:
        raise VarsError(str(e))
    try:
        v.update(hostvars.resolve(dl, variables, ["sglang_api_key"]))
    except hostvars.HostVarsError:
        v["sglang_api_key"] = None
    return v


def vars_of(args, extra=()):
    """The variables a command runs with: the host's with -i (host_vars), else load_vars of
    --vars. Sets args.url (the host's server) and args.api_key (its sglang_api_key) when not given."""
    if not getattr(args, "inventory", None):
        if getattr(args, "vault_password_file", None):
            raise VarsError("--vault-password-file reads an inventory's vaulted files: "
                            "give -i INVENTORY --host NAME")
        return flat(load_vars(args.vars, extra)[0])
    v = flat(host_vars(args, extra))
    if hasattr(args, "url") and not args.url:
        from bench.hostvars import url_of
        args.url = url_of(v)
    if hasattr(args, "api_key") and not args.api_key:
        args.api_key = v.get("sglang_api_key") or None
    return v


def flat(v):
    """``v`` with its profiles and thresholds inherited and drafters placed (inherit.resolve, as
    the deploy plan reads them); VarsError naming what does not resolve."""
    profiles, thresholds, problems = inherit.of_vars(v)
    if problems:
        raise VarsError("; ".join(problems))
    return dict(v, sglang_profiles=profiles, sglang_gate_thresholds=thresholds)


def need_url(args):
    if not args.url:
        raise VarsError("no server: give --url URL, or -i INVENTORY --host NAME for the host's own")


def add_inventory_args(p, host_help):
    """-i INVENTORY --host NAME [--vault-password-file FILE]: a host's variables as Ansible's."""
    p.add_argument("-i", "--inventory", metavar="INVENTORY",
                   help="an Ansible inventory (file or directory): with --host, the host's variables "
                        "(role defaults, group_vars, host_vars) as ansible-playbook sees them, --vars on top")
    p.add_argument("--host", metavar="NAME", help=host_help)
    p.add_argument("--vault-password-file", metavar="FILE",
                   help="with -i: decrypt the inventory's vaulted files (else they are skipped, with a note)")


def role_case(name="coding"):
    """Case ``name`` of the role's default gate plan (roles/sglang_gate/defaults/main.yml), which
    `bench run` measures by default; None when PyYAML is not there (a bare Python)."""
    try:
        import yaml
    except ImportError:
        return None
    return dict(yaml.safe_load(ROLE_DEFAULTS[1].read_text())["sglang_gate_plan"][name])


def common_options(v, url, api_key, model):
    return {"url": url, "api_key": api_key, "model": model, "api": v.get("sglang_gate_api", "chat"),
            "warmup": v.get("sglang_gate_warmup", 2),
            "confidence": v.get("sglang_gate_confidence", 0.95),
            "inconclusive": v.get("sglang_gate_inconclusive", "fail"),
            "first_token_timeout": v.get("sglang_gate_first_token_timeout"),
            "stall_timeout": v.get("sglang_gate_stall_timeout"),
            "run_timeout": v.get("sglang_gate_run_timeout"),
            "max_regression_pct": v.get("sglang_gate_max_regression_pct")}


def promise_of(v, profile):
    p = (v.get("sglang_profiles") or {}).get(profile) or {}
    return {"context_length": p.get("context_length"), "max_running_requests": p.get("max_running_requests")}


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def host_nvidia_smi(args):
    """The nvidia-smi of the machine the server runs on, (path, why none): this one's when the
    URL is on loopback (--nvidia-smi auto) or --nvidia-smi names one; none for a server elsewhere."""
    import shutil
    name = getattr(args, "nvidia_smi", "auto")
    if name == "auto":
        if urlsplit(args.url).hostname not in LOOPBACK:
            return None, "the server is not on this machine: no GPU figures (--nvidia-smi CMD asks one)"
        name = "nvidia-smi"
    path = shutil.which(name) if name else None
    return path, "%s: not found (no GPU figures)" % name if name else None


def add_nvidia_smi_arg(p, what):
    """--nvidia-smi CMD, read by host_nvidia_smi: what its answers make (``what``)."""
    p.add_argument("--nvidia-smi", default="auto", metavar="CMD",
                   help="the nvidia-smi of the server's GPUs, for %s (auto: this machine's when the URL is "
                        "on loopback, else none; '' none)" % what)


def host_fingerprint(args, v, profile):
    """The fingerprint of the machine the server runs on (host_nvidia_smi's), and a watch on its
    clocks started with it (fingerprint.watch; run_cases stops it)."""
    path, missing = host_nvidia_smi(args)
    settings = (v.get("sglang_profiles") or {}).get(profile)
    identity = {"profile": profile,
                "profile_sha256": fingerprint.settings_sha256(settings) if settings else None}
    fp = fingerprint.take(fingerprint.run_argv, path, identity, missing=missing)
    return fp, fingerprint.watch(fingerprint.run_argv, path)


def given_answers(args, v):
    """The known answers the quality checks ask: --answers FILE, else the vars'
    sglang_gate_answers, parsed (answers.parse) with where they came from; None for the
    built-in set. ConfigError names the option and the bad rows."""
    path = getattr(args, "answers", None) or v.get("sglang_gate_answers")
    if not path:
        return None
    name = "--answers" if getattr(args, "answers", None) else "sglang_gate_answers"
    return answers.read(str(Path(path).resolve()), name)


def run_plan(args, v, profile, cases=None, **kw):
    """The plan of vars ``v`` (or its resolved ``cases``, plan.resolve's) against ``args.url``,
    progress lines on stderr unless --quiet."""
    progress = None if args.quiet else progress_printer(sys.stderr)
    common = common_options(v, args.url, args.api_key, args.model)
    extra = dict(promise=promise_of(v, profile), progress=progress, answers=given_answers(args, v), **kw)
    try:
        extra["fingerprint"], extra["clocks"] = host_fingerprint(args, v, profile)
        if cases is not None:
            return plan.run_cases(common, cases, profile, **extra)
        return plan.run(common, v.get("sglang_gate_plan"), v.get("sglang_gate_thresholds"), profile, **extra)
    finally:
        if progress is not None:
            progress.close()


def guarded(name, fn, args):
    """``fn(args)``, with every reason the server could not be measured as exit 2."""
    try:
        return fn(args)
    except (VarsError, OSError) as e:
        sys.stderr.write("bench %s: %s\n" % (name, e))
    except ConfigError as e:
        sys.stderr.write("bench %s: invalid %s: %s\n" % (name, e.option, e.message))
    except MeasureError as e:
        sys.stderr.write("bench %s: could not measure %s: %s\n" % (name, args.url, e))
    return EXIT_UNMEASURED


def profile_of(args, v):
    profile = args.profile or v.get("sglang_profile")
    if not profile:
        raise VarsError("no profile: give --profile or set sglang_profile in a --vars file")
    return profile


def add_parser(sub):
    p = sub.add_parser("gate", help="run the sglang_gate role's plan against a server",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="base URL, e.g. http://127.0.0.1:30000 (default with -i: the host's, "
                                 "http://ansible_host:sglang_port)")
    add_inventory_args(p, "with -i: the inventory host (its variables; the history record names it); "
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
    add_inventory_args(p, "with -i: the inventory host (its variables, its name in the comments); "
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
        raise VarsError("--runs must be 2 or more (a spread needs two runs), got %d" % args.runs)
    v = vars_of(args)
    need_url(args)
    profile = profile_of(args, v)
    if args.write == "":
        if not args.inventory:
            raise VarsError("--write without FILE writes the host's vars: give -i INVENTORY --host NAME")
        args.write = str(calibration_file(v))
    old, existing = "", None
    if args.write and Path(args.write).is_file():
        import yaml
        old = Path(args.write).read_text()
        existing = (yaml.safe_load(old) or {}).get("sglang_gate_calibrated")
    runs = []
    for i in range(args.runs):
        sys.stderr.write("calibrate: run %d of %d\n" % (i + 1, args.runs))
        runs.append(run_plan(args, v, profile))
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


def calibration_file(v):
    """Where playbooks/calibrate.yml writes the host's thresholds (its calibrate_file)."""
    return Path(v["inventory_dir"]) / "host_vars" / v["inventory_hostname"] / "gate_calibration.yml"


def _gate(args):
    v = vars_of(args)
    need_url(args)
    profile = profile_of(args, v)
    baseline = None
    if args.baseline_history:
        baseline = history.last_known_good(history.read(args.baseline_history), profile)
    if not args.quiet:
        sys.stderr.write("gate plan for profile %s against %s: %s\n" % (
            profile, args.url, ", ".join(v.get("sglang_gate_plan") or {})))
    result = run_plan(args, v, profile, calibrated=v.get("sglang_gate_calibrated") or None,
                      baseline=baseline)
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
    """The run as the role's history record (sglang_perf/history.py record()), appended as one
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
