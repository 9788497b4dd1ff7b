# -*- coding: utf-8 -*-
"""The deploy plan of one host, computed once on the controller before anything changes: every
refusal of the roles' inputs (each naming its variable), and what the roles, the gate, the rescue
and the rollout summary read instead of deriving it again - the engine and its version, the
release name (from the lock file and the wheels' checksums), the argv, the unit's paths, the
multi-node topology, the resolved gate cases and thresholds, the exposure verdict.

``build`` is a pure function of its inputs (bench/planner.py gathers them, for the action plugin
and every command) and returns a ``parts.Plan``, one small builder per part (``_release``, ``_gpu``,
``_server``, ``_gate``, ``_watch``); ``make`` hands it on as the host's fact, a dict of parts.
Standard library only."""
from __future__ import annotations

import hashlib
import json
import re

from ..judge import quality
from ..measure import answers, corpus
from . import capacity, drafter, fleet, gate, inherit, parts, profile
from .. import engines
from ..record import exposition, fingerprint
from ..host import measurelock, watch
from ..measure.client import ConfigError
from ..engines.settings import is_revision

ROLES = ("nvidia_gpu", "sglang", "sglang_gate", "sglang_watch")
# What the unit's ProtectHome=yes hides from the service (templates/sglang.service.j2).
UNIT_HIDDEN_PATHS = ["/home", "/root", "/run/user"]
HIDDEN = "(hidden)"

_RELEASE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(\.?post[0-9]+)?$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _num(value, default=None):
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _abs(value):
    return isinstance(value, str) and value.startswith("/")


def _match(pattern, value):
    return isinstance(value, str) and re.match(pattern, value) is not None


def _version_key(text):
    return tuple(int(p) for p in re.findall(r"[0-9]+", str(text)))


def _value_checks(v):
    """(variable, shown value, what is valid, ok) of the values the argument specs cannot check."""
    ports = _int(v.get("sglang_port"))
    nets = v.get("sglang_allowed_networks") or []
    modules = v.get("sglang_launch_modules")
    revision = v.get("sglang_model_revision")
    snapshot = v.get("sglang_model_snapshot_path") or ""
    endpoint = v.get("sglang_hf_endpoint") or ""
    key = v.get("sglang_api_key") or ""
    token = v.get("sglang_hf_token") or ""
    yield ("sglang_port", None, "a TCP port from 1 to 65535", ports is not None and 1 <= ports <= 65535)
    yield ("sglang_allowed_networks", None, "CIDR networks such as 10.1.230.0/24 or fd00::/8",
           isinstance(nets, list) and all(_match(r"^[0-9A-Fa-f:.]+/[0-9]{1,3}$", n) for n in nets))
    yield ("sglang_releases_dir", None, "an absolute path", _abs(v.get("sglang_releases_dir")))
    yield ("sglang_releases_keep", None, ">= 1 release kept", (_int(v.get("sglang_releases_keep")) or 0) >= 1)
    yield ("sglang_deploy_lock_path", None, "an absolute path", _abs(v.get("sglang_deploy_lock_path")))
    yield ("sglang_deploy_lock_max_age", None, "seconds >= 60 (longer than a deploy takes)",
           (_int(v.get("sglang_deploy_lock_max_age")) or 0) >= 60)
    for var in ("sglang_state_dir", "sglang_config_dir", "sglang_model_dir", "sglang_model_path"):
        yield (var, None, "an absolute path", _abs(v.get(var)))
    yield ("sglang_model_snapshot_path", None, "empty, or an absolute path", not snapshot or _abs(snapshot))
    yield ("sglang_model_revision", None, "a commit sha (40 hex digits), a branch or a tag",
           is_revision(revision))
    yield ("sglang_hf_endpoint", None, "empty, or an http(s) URL without credentials",
           not endpoint or _match(r"^https?://[^\s/@]+(/[^\s@]*)?$", endpoint))
    yield ("sglang_engine", None, "sglang or vllm (a profile may name its own engine)",
           v.get("sglang_engine") in engines.names())
    yield ("sglang_launch_modules", None,
           "a mapping of each engine (sglang, vllm) to a dotted Python module name such as "
           "sglang.launch_server",
           isinstance(modules, dict) and set(engines.names()) <= set(modules)
           and all(_match(_MODULE.pattern, m) for m in modules.values()))
    yield ("sglang_service_name", None, "a systemd unit name: letters, digits, - and _ (no .service suffix)",
           _match(r"^[A-Za-z0-9_-]+$", v.get("sglang_service_name")))
    yield ("sglang_user", None, "a non-root user name", v.get("sglang_user") not in ("root", "", None))
    yield ("sglang_served_model_name", None,
           "a non-empty name without white space or ':' (SGLang's start-up check reserves ':' for "
           "model:adapter LoRA names)", _match(r"^[^\s:]+$", v.get("sglang_served_model_name")))
    yield ("sglang_ready_timeout", None, "seconds >= 30 (a 27B model load takes minutes)",
           (_int(v.get("sglang_ready_timeout")) or 0) >= 30)
    yield ("sglang_start_timeout_sec", None, "seconds >= 300 (systemd's 90 s kills a model load)",
           (_int(v.get("sglang_start_timeout_sec")) or 0) >= 300)
    yield ("sglang_limit_nofile", None, ">= 4096 open files",
           (_int(v.get("sglang_limit_nofile")) or 0) >= 4096)
    yield ("sglang_api_key", HIDDEN, "empty, or at least 16 characters without white space or quotes",
           not key or _match(r"^[^\s\"']{16,}$", key))
    yield ("sglang_hf_token", HIDDEN, "empty, or a Hugging Face token (hf_...) without white space",
           not token or _match(r"^hf_[A-Za-z0-9]{20,}$", token))
    yield ("sglang_version", None, "an SGLang release such as 0.5.23",
           _match(_RELEASE.pattern, v.get("sglang_version")))
    yield ("sglang_vllm_version", None, "a vLLM release such as 0.33.0",
           _match(_RELEASE.pattern, v.get("sglang_vllm_version")))


def _gpu_value_checks(v):
    userspace = v.get("nvidia_gpu_userspace_packages") or []
    fpr = str(v.get("nvidia_gpu_repo_key_fingerprint") or "").replace(" ", "")
    yield ("nvidia_gpu_driver_branch", None, "a driver branch such as 580",
           _match(r"^[0-9]{3}$", str(v.get("nvidia_gpu_driver_branch"))))
    yield ("nvidia_gpu_min_driver_version", None, "a driver version such as 580.65.06",
           _match(r"^[0-9]{3}([.][0-9]+){1,2}$", str(v.get("nvidia_gpu_min_driver_version"))))
    yield ("nvidia_gpu_userspace_packages", None, "package names without a version (the role adds it)",
           not any(re.search(r"[=\s]", p) for p in userspace))
    yield ("nvidia_gpu_cuda_version", None, "a CUDA version such as 13.0",
           _match(r"^[0-9]+[.][0-9]+$", str(v.get("nvidia_gpu_cuda_version"))))
    yield ("nvidia_gpu_expected_count", None, "the number of GPUs the host has (>= 1)",
           (_int(v.get("nvidia_gpu_expected_count")) or 0) >= 1)
    yield ("nvidia_gpu_expected_memory_mib", None, "MiB per GPU (46000 for a 48 GB A6000)",
           (_int(v.get("nvidia_gpu_expected_memory_mib")) or 0) >= 1024)
    yield ("nvidia_gpu_expected_model", None, "part of the GPU name nvidia-smi prints (RTX A6000)",
           bool(v.get("nvidia_gpu_expected_model")))
    yield ("nvidia_gpu_repo_key_fingerprint", None, "40 hex digits", _match(r"^[0-9A-Fa-f]{40}$", fpr))


def _gate_value_checks(v):
    reg = v.get("sglang_gate_max_regression_pct")
    yield ("sglang_gate_warmup", None, "warmup requests >= 0", (_int(v.get("sglang_gate_warmup"), -1)) >= 0)
    for var in ("sglang_gate_first_token_timeout", "sglang_gate_stall_timeout", "sglang_gate_run_timeout"):
        yield (var, None, "seconds > 0", (_int(v.get(var)) or 0) > 0)
    yield ("sglang_gate_history_path", None, "an absolute path", _abs(v.get("sglang_gate_history_path")))
    yield ("sglang_gate_lkg_dir", None, "an absolute path", _abs(v.get("sglang_gate_lkg_dir")))
    yield ("sglang_gate_max_regression_pct", None, "null (report only) or a percentage from 0 to 100",
           reg is None or (_num(reg) is not None and 0 <= _num(reg) <= 100))
    smi = v.get("sglang_gate_nvidia_smi")
    yield ("sglang_gate_nvidia_smi", None, "a command name on the host's PATH, an absolute path, or '' "
           "(the fingerprint asks no nvidia-smi)",
           isinstance(smi, str) and not any(c.isspace() for c in smi) and ("/" not in smi or _abs(smi)))


def _shown(value):
    """A value as the messages show it (as Jinja printed it: True, None, lists in Python's form)."""
    return value if isinstance(value, str) else repr(value) if isinstance(value, (list, dict)) else str(value)


def _refusals(checks, v):
    return ["%s = %s is not valid: %s" % (var, shown if shown is not None else _shown(v.get(var)), valid)
            for var, shown, valid, ok in checks if not ok]


def release_name(engine, version, lock_text, packages, wheel_checksums):
    """<version>-<10 hex digits of the checksum over the lock file, the requirements and the local
    wheels' contents> (vLLM's: vllm-<version>-...); <version>-unlocked without a lock file. The
    same inputs name the same release on every host and every run."""
    prefix = getattr(engines.find(engine), "release_prefix", "")
    if lock_text is None:
        return "%s%s-unlocked" % (prefix, version)
    inputs = {"lock": lock_text, "packages": list(packages), "wheels": list(wheel_checksums)}
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return "%s%s-%s" % (prefix, version, digest[:10])


def local_url(bind, port):
    """Where the host itself reaches the server (the readiness wait and the gate run on the host)."""
    return "http://%s:%s" % ("127.0.0.1" if bind in ("0.0.0.0", "::", "", None) else bind, port)


def _engine(chosen, v):
    """(engine, version) of the flat profile ``chosen``."""
    engine = profile.profile_engine(chosen if isinstance(chosen, dict) else {}, v.get("sglang_engine"))
    return engine, v.get(_version_var(engine))


def _version_var(engine):
    """The variable naming ``engine``'s release (the default engine's for an unknown one)."""
    return engines.find(engine, engines.get(engines.DEFAULT)).version_var


def local_wheels(paths, engine, version):
    """sglang_pip_local_files with ``{engine}`` and ``{version}`` replaced by the release's (an
    inventory that ships one wheel per engine names it once)."""
    return [str(p).replace("{engine}", str(engine)).replace("{version}", str(version)) for p in paths or ()]


def make(v, host, groups, hostvars, play_hosts=None, facts=None, read_lock=None, locks_dir="",
         wheel_digest=None, review=False, roles=ROLES):
    """The plan of ``host`` as the host's fact (``build``'s Plan as a dict)."""
    return build(v, host, groups, hostvars, play_hosts, facts, read_lock, locks_dir, wheel_digest, review,
                 roles).as_dict()


def build(v, host, groups, hostvars, play_hosts=None, facts=None, read_lock=None, locks_dir="",
          wheel_digest=None, review=False, roles=ROLES):
    """The plan of ``host`` (parts.Plan). ``v``: the roles' inputs (every variable of their argument
    specs, type-checked, plus the role data it names); ``wheel_digest(path)``: the sha256 of a wheel
    of sglang_pip_local_files on the controller, None when it is missing; ``read_lock(path)``: the
    lock file's text, None when there is none; ``locks_dir``: the role's lock files
    (sglang_pip_constraints ''). Its ``problems`` (every refusal) is [] when the deploy can go on."""
    problems = []
    out = parts.Plan(host=host, roles=list(roles), problems=problems)
    if "nvidia_gpu" in roles:
        problems.extend(_gpu_stack_problems(v, host, facts or {}))
    if "sglang_rollout_canary" in v or "sglang_rollout_batch" in v:  # the deploy's play inputs
        problems.extend(fleet.sglang_rollout_errors(v.get("sglang_rollout_canary"),
                                                    v.get("sglang_rollout_batch")))
    if "sglang" not in roles:
        return out
    # a host's own profiles and thresholds over the inventory's, by name: every check reads both
    profiles, thresholds = inherit.with_host(
        v.get("sglang_profiles"), v.get("sglang_gate_thresholds"),
        v.get(inherit.HOST_PROFILES_VAR), v.get(inherit.HOST_THRESHOLDS_VAR))
    v = dict(v, sglang_profiles=profiles, sglang_gate_thresholds=thresholds)
    problems.extend(_refusals(_value_checks(v), v))
    name = v.get("sglang_profile")
    # the one resolution of bases: every check and consumer below reads the flat profiles
    profiles, thresholds, inherit_problems = inherit.resolve(v.get("sglang_profiles") or {},
                                                             v.get("sglang_gate_thresholds"),
                                                             v.get("sglang_model_dir"))
    problems.extend(inherit_problems)
    chosen = profiles.get(name) if isinstance(profiles, dict) else None
    engine, version = _engine(chosen, v)
    hardware = v.get("sglang_hardware") or None
    topo = fleet.sglang_topology(v.get("sglang_multinode_group"), groups, hostvars, host, play_hosts,
                                 port=_int(v.get("sglang_dist_init_port"), 20000))
    if v.get("sglang_multinode_group"):
        if topo["errors"]:
            problems.append("%s: %s" % (host, "; ".join(topo["errors"])))
    try:
        profile_problems = profile.sglang_profile_errors(
            profiles, name, (hardware or {}).get("gpu_count"), nnodes=topo["nnodes"], group=topo["group"],
            version=version, engine=v.get("sglang_engine"), hardware=hardware,
            allow_lossy=v.get("sglang_allow_lossy_speculation") is True)
    except ValueError as e:  # a version the flag tables cannot read (the value check named it)
        profile_problems = [str(e)]
    if profile_problems:
        problems.append("%s: %s" % (host, "; ".join(profile_problems)))
    settings = chosen if not profile_problems and isinstance(chosen, dict) else None
    out.profile, out.settings, out.topology = name, settings, topo
    memory = _memory(v, problems, host, name, settings, hardware)
    exposure = _exposure(v, problems, host)
    out.release = _release(v, problems, engine, version, locks_dir, read_lock, wheel_digest, review)
    out.gpu = _gpu(v, problems, engine, version, hardware, memory, review)
    snapshot = v.get("sglang_model_snapshot_path") or ""
    out.model = parts.Model(
        load_path=snapshot or v.get("sglang_model_path"), served_name=v.get("sglang_served_model_name"),
        size=v.get("sglang_model_size"),
        # the profile's drafter, which tasks/model.yml judges beside the model (None: none)
        drafter=drafter.artifact(settings, profile.accept_ceiling(settings, engine)) if settings else None)
    lock_path = v.get("sglang_deploy_lock_path")
    out.lock = parts.Lock(path=lock_path, max_age=_int(v.get("sglang_deploy_lock_max_age")),
                          measure_path=measurelock.beside(lock_path),
                          break_lock=bool(v.get("sglang_break_lock")))
    out.server = _server(v, problems, host, out, exposure)
    if "sglang_gate" in roles:
        out.gate = _gate(v, problems, out, profiles, thresholds)
    if "sglang_watch" in roles:
        out.watch = _watch(v, problems, out)
    return out


def _gpu_stack_problems(v, host, facts):
    """The nvidia_gpu role's refusals: its values, and a distribution NVIDIA has no repository for."""
    problems = _refusals(_gpu_value_checks(v), v)
    distros = v.get("_nvidia_gpu_repo_distros") or {}
    distro = "%s-%s" % (facts.get("distribution"), facts.get("distribution_major_version"))
    if distro not in distros and not v.get("nvidia_gpu_allow_absent"):
        problems.append("%s %s on %s is not supported: the role knows NVIDIA's CUDA repository for %s"
                        % (facts.get("distribution"), facts.get("distribution_version"), host,
                           ", ".join(distros)))
    return problems


def _memory(v, problems, host, name, settings, hardware):
    """The profile's memory budget, a line per GPU (None: no hardware or no valid profile)."""
    if not (hardware and settings):
        return None
    try:
        budget = capacity.profile_memory_budget(
            settings, v.get("sglang_model_size"), hardware, v.get("sglang_memory_full_context_requests", 1),
            v.get("sglang_memory_default_fraction", 0.88))
    except capacity.CapacityError as e:
        problems.append("%s: sglang_model_size, sglang_hardware: %s" % (host, e))
        return None
    if not budget["fits"]:
        problems.append(
            "%s: profile %s does not fit in GPU memory: %s. Estimate per GPU: %s (sglang_model_size, "
            "sglang_hardware; raise mem_fraction_static, lower context_length or "
            "max_running_requests)"
            % (host, name, "; ".join(budget["problems"]), "; ".join(budget["lines"])))
    return budget["lines"]


def _exposure(v, problems, host):
    """Whether the bind address, the API key and the allowed networks go together."""
    api_key_set = bool(v.get("sglang_api_key"))
    found = profile.sglang_exposure_errors(v.get("sglang_host"), api_key_set,
                                           v.get("sglang_allowed_networks") or [],
                                           bool(v.get("sglang_allow_open_network")))
    if found:
        problems.append("%s: %s" % (host, "; ".join(found)))
    return {"problems": found, "host": v.get("sglang_host"), "api_key": api_key_set,
            "allowed_networks": list(v.get("sglang_allowed_networks") or []),
            "open_network": bool(v.get("sglang_allow_open_network"))}


def _release(v, problems, engine, version, locks_dir, read_lock, wheel_digest, review):
    """The release: its requirements ([]: the engine at its version), its lock file ('': the
    role's for the engine and version) and the local wheels on the controller."""
    packages = list(v.get("sglang_pip_packages") or ["%s==%s" % (engine, version)])
    lock_path = v.get("sglang_pip_constraints") or "%s/%s-%s.txt" % (locks_dir, engine, version)
    lock_text = read_lock(lock_path) if read_lock else None
    locked = lock_text is not None
    wheels = [(path, wheel_digest(path) if wheel_digest else None)
              for path in local_wheels(v.get("sglang_pip_local_files"), engine, version)]
    missing = [path for path, digest in wheels if digest is None]
    if not locked and not review:
        problems.append("sglang_pip_constraints: no lock file at %s for %s %s (write it with: python "
                        "scripts/lock_release.py %s==%s > %s)"
                        % (lock_path, engine, version, engine, version, lock_path))
    elif missing:
        problems.append("sglang_pip_local_files: not on the controller: %s" % ", ".join(missing))
    known = engines.find(engine)
    name = release_name(engine, version, lock_text, packages, [digest for _, digest in wheels])
    releases_dir = v.get("sglang_releases_dir")
    return parts.Release(
        engine=engine, label=getattr(known, "label", str(engine)), docs=getattr(known, "docs", ""),
        version=version, name=name, dir="%s/%s" % (releases_dir, name),
        venv="%s/%s/venv" % (releases_dir, name),
        inputs={"lock": lock_path if locked else None,
                "lock_sha256": hashlib.sha256(lock_text.encode()).hexdigest() if locked else None,
                "packages": packages, "wheels": [{"path": p, "sha256": d} for p, d in wheels]},
        launch_module=(v.get("sglang_launch_modules") or {}).get(engine) if known else None,
        releases_dir=releases_dir, keep=_int(v.get("sglang_releases_keep")))


def _gpu(v, problems, engine, version, hardware, memory, review):
    """The GPUs' part: the hardware, the memory budget, and the driver the engine release's CUDA
    runtime needs (a unit rendered for review: not installed, not checked)."""
    known = engines.find(engine)
    cuda = (v.get("sglang_cuda_runtime") or known.cuda_runtime.get(version)) if known else None
    need = (v.get("_sglang_min_driver_by_cuda") or {}).get(cuda) if cuda else None
    if known and not review:
        branch = v.get("nvidia_gpu_driver_branch")
        if cuda is None:
            problems.append("%s %s: its CUDA runtime is unknown (engines/%s.py cuda_runtime lists %s): "
                            "read the CUDA runtime of the torch it pins from the wheels and set "
                            "sglang_cuda_runtime, so the driver check can run"
                            % (engine, version, engine, ", ".join(sorted(known.cuda_runtime))))
        elif branch is not None and _version_key("%s.999.99" % branch) < _version_key(need or "0"):
            problems.append("%s %s runs on CUDA %s, which needs NVIDIA driver >= %s; "
                            "nvidia_gpu_driver_branch is %s: raise the branch or keep %s"
                            % (engine, version, cuda, need, branch, _version_var(engine)))
    return parts.Gpu(hardware=hardware, memory=memory, cuda_runtime=cuda, min_driver=need)


def _server(v, problems, host, plan, exposure):
    """The unit: its paths, its argv (None when the profile, the engine or the topology is not
    valid) and where the host reaches the server."""
    service, config_dir = v.get("sglang_service_name"), v.get("sglang_config_dir")
    known = engines.find(plan.release.engine)
    url = local_url(v.get("sglang_host"), v.get("sglang_port"))
    server = parts.Server(
        service=service, user=v.get("sglang_user"), group=v.get("sglang_group"),
        python=v.get("sglang_python"), state_dir=v.get("sglang_state_dir"),
        unit_path="/etc/systemd/system/%s.service" % service,
        env_path="%s/%s.env" % (config_dir, service),
        secrets_path="%s/%s-secrets.yaml" % (config_dir, service),
        hidden_paths=list(UNIT_HIDDEN_PATHS), argv=None, local_url=url,
        drift_url=v.get("sglang_drift_url") or url,
        ready_paths=list(getattr(known, "ready_paths", [])),
        drift_paths=list(getattr(known, "drift_paths", [])),
        drift_answers_secret=bool(getattr(known, "drift_answers_secret", True)),
        exposure=exposure, adopt_existing=bool(v.get("sglang_adopt_existing")),
        adopt_backup_dir=v.get("sglang_adopt_backup_dir"))
    topo, module = plan.topology, plan.release.launch_module
    if plan.settings is not None and module and not topo["errors"]:
        multinode = topo["enabled"]
        flags = {"model_path": plan.model.load_path, "served_model_name": plan.model.served_name,
                 "host": v.get("sglang_host"), "port": v.get("sglang_port"),
                 "trust_remote_code": v.get("sglang_trust_remote_code"),
                 "enable_metrics": v.get("sglang_enable_metrics"),
                 "config": server.secrets_path if exposure["api_key"] else None,
                 "nnodes": topo["nnodes"] if multinode else None,
                 "node_rank": topo["node_rank"] if multinode else None,
                 "dist_init_addr": topo["dist_init_addr"] if multinode else None}
        try:
            server.argv = [plan.release.venv + "/bin/python", "-m", module] + \
                profile.sglang_argv(plan.settings, plan.release.version, flags, engine=v.get("sglang_engine"))
        except ValueError as e:
            problems.append("%s: %s" % (host, e))
    return server


def _watch(v, problems, plan):
    """The watch's part of the plan: whether this host gets it (enabled, and the node serving the
    API: rank 0) and, when it does, its settings file (watch.configure, its refusals)."""
    rank = int((plan.topology or {}).get("node_rank") or 0)
    if not (v.get("sglang_watch_enabled") and rank == 0):
        return parts.Watch(active=False)
    settings, found = watch.configure(plan.as_dict(), {k: v.get(k) for k in watch.INPUTS})
    problems.extend(found)
    return parts.Watch(active=True, settings=settings)


def gate_answers(path, name="sglang_gate_answers"):
    """A host's known-answers file on the controller, read and checked before anything changes:
    ``(summary, problems)``: summary {path, sha256, answers, calls} (rows of each kind) or None
    for no file ('' or None)."""
    if not path:
        return None, []
    try:
        rows = answers.read(path, name)
    except (OSError, UnicodeDecodeError) as e:
        return None, ["%s = %s cannot be read: %s" % (name, path, e)]
    except ConfigError as e:
        said = " %s" % e.message if e.message.startswith("must") else " = %s: %s" % (path, e.message)
        return None, [name + said]
    return dict({k: rows[k] for k in ("path", "sha256", "source")},
                answers=len(rows["answers"]), calls=len(rows["calls"])), []


def promise_of(settings):
    """What a profile's settings promise the gate checks the server holds (plan.check_capacity)."""
    return {"context_length": (settings or {}).get("context_length"),
            "max_running_requests": (settings or {}).get("max_running_requests")}


# the gate's measurement options, each its role input sglang_gate_<name>
GATE_OPTIONS = ("api", "warmup", "confidence", "inconclusive", "first_token_timeout", "stall_timeout",
                "run_timeout", "max_regression_pct")


def _gate(v, problems, plan, profiles, thresholds):
    """The gate's part of the plan: its checks, the resolved cases, and what the sglang_bench
    module reads besides them. Its '' paths are under the sglang role's state directory."""
    state = v.get("sglang_state_dir")
    history = v.get("sglang_gate_history_path") or "%s/gate-history.jsonl" % state
    lkg_dir = v.get("sglang_gate_lkg_dir") or "%s/last-known-good" % state
    v = dict(v, sglang_gate_thresholds=thresholds, sglang_gate_history_path=history,
             sglang_gate_lkg_dir=lkg_dir)
    name, chosen, hardware = plan.profile, plan.settings, plan.gpu.hardware
    gate_plan = v.get("sglang_gate_plan")
    calibrated, confidence = v.get("sglang_gate_calibrated") or None, _num(v.get("sglang_gate_confidence"),
                                                                           v.get("sglang_gate_confidence"))
    plan_problems = gate.problems(gate_plan, thresholds, name, calibrated, confidence=confidence)
    problems.extend(plan_problems)
    cases, text = [], ""
    if not plan_problems:
        try:
            cases = gate.resolve(gate_plan, thresholds, name, calibrated, confidence=confidence)
        except ConfigError as e:  # gate.problems said nothing: not expected
            problems.append(e.message)
        top = max([c["thresholds"].get("min_accept_len") or 0 for c in cases] or [0])
        if top > 0:
            accept = profile.sglang_profile_errors(
                # lossy settings are judged once, with the profile (allow_lossy here: not again)
                profiles, name, engine=v.get("sglang_engine"), min_accept_len=top, allow_lossy=True,
                accept_var="sglang_gate_thresholds.%s (the highest min_accept_len of its cases)" % name)
            problems.extend(accept)
        if hardware and chosen is not None:
            try:
                problems.extend(capacity.reach_errors(cases, chosen, name, v.get("sglang_model_size"),
                                                      hardware, profile.accept_ceiling(
                                                          chosen, v.get("sglang_engine"))))
            except capacity.CapacityError as e:
                problems.append("sglang_model_size, sglang_hardware: %s" % e)
        text = gate.describe(cases, float(confidence), v.get("sglang_gate_inconclusive"))
    problems.extend(_refusals(_gate_value_checks(v), v))
    api = v.get("sglang_gate_api")
    problems.extend("sglang_gate_plan.%s.thinking needs sglang_gate_api: chat (the %s API sends the "
                    "prompt without the chat template, which is what turns thinking on)" % (c["case"], api)
                    for c in cases if c["options"].get("thinking") and api != "chat")
    textfile = v.get("sglang_gate_textfile_path") or ""
    problems.extend("sglang_gate_textfile_path = %s: %s" % (textfile, p)
                    for p in exposition.path_problems(textfile))
    given, bad = gate_answers(v.get("sglang_gate_answers"))
    problems.extend(bad)
    when = v.get("sglang_gate_pressure") or ""
    if when and when not in quality.WHEN:
        problems.append("sglang_gate_pressure must be one of %s or '' (the plan's), got %r"
                        % (", ".join(quality.WHEN), when))
    elif when:
        for c in cases:
            if c["options"].get("check") == "pressure":
                c["options"]["when"] = when
    promise = promise_of(chosen)
    # how every case is measured (the engine's options besides the server's URL, key and model)
    options = {k: v.get("sglang_gate_" + k) for k in GATE_OPTIONS}
    options["confidence"] = confidence
    lkg_import = v.get("sglang_gate_lkg_import") or ""
    release, model = plan.release, plan.model
    # the sizes of the roofline: the GPUs serving the model (all nodes' share of tensor parallelism
    # for a multi-node deployment)
    gpus = dict(hardware, gpu_count=(chosen or {}).get("tp_size")) if hardware and plan.topology["enabled"] \
        else hardware
    return parts.Gate(
        cases=cases, text=text, promise=promise, answers=given, options=options,
        notes=gate.plan_notes(gate_plan, thresholds, name) if cases else [],
        lkg_import=re.sub(r"(\.service)?$", ".service", lkg_import, count=1) if lkg_import else "",
        history_path=history, lkg_dir=lkg_dir,
        # the long-context corpus: AnsiballZ ships the modules' Python only, so the role copies the
        # file the controller reads (and checked the long-context cases against) to the host, where
        # the sglang_bench module reads it (measure/corpus.py)
        corpus_source=corpus.path(), corpus_path="%s/corpus.json" % state,
        # what the host's fingerprint records beside the GPUs (fingerprint.IDENTITY)
        identity={"engine": release.engine, "version": release.version, "release": release.name,
                  "profile": name, "profile_sha256": fingerprint.settings_sha256(chosen) if chosen else None,
                  # the weights, whose commits the host's fingerprint reads
                  "model": {"repo": v.get("sglang_model_repo"), "revision": v.get("sglang_model_revision"),
                            "path": model.load_path},
                  "drafter": model.drafter},
        nvidia_smi=v.get("sglang_gate_nvidia_smi"), profile=name, measure_lock=plan.lock.measure_path,
        model_size=model.size if hardware else None, hardware=gpus)

