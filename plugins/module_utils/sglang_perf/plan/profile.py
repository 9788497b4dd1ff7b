# -*- coding: utf-8 -*-
"""A launch profile -> validated argv for the installed engine and version; the profile's checks,
drift, and a command line read back into a profile. The filters of plugins/filter/sglang_profile.py
and the deploy plan (deploy_plan.py) call these.

The unit template stays dumb: it joins what ``sglang_argv`` returns (with systemd_exec_args.py).
What is engine-specific - flag names per version, choices, speculative checks, argv, drift,
takeover - lives in the engine modules (sglang_perf/engines/); the settings' records
(engines/settings.py) give each setting's type and check. ``sglang_profile_errors`` refuses
inconsistent profiles before any host changes, naming the variable and the rule (SGLang itself
raises a bare AssertionError or TypeError for several of these, at start-up, minutes into a model
load). A setting with no counterpart in the chosen engine is refused by name (its record says why).
Standard library only (Ansible's error class when Ansible is there).
"""
from __future__ import annotations

import difflib
import ipaddress
import re

from . import drafter
from .. import engines
from ..engines import common, settings
from ..engines.settings import PROFILE_KEYS, ProfileError, is_int as _is_int, is_num as _is_num
from ..engines.settings import same as _same, text as _text
from ..engines.settings import version_tuple as version_tuple  # re-exported: the filters and tests use it

_SGLANG = engines.get(engines.DEFAULT)


def profile_engine(profile, default=engines.DEFAULT):
    """The engine a profile runs on: its own ``engine`` key, else ``default`` (sglang_engine)."""
    if isinstance(profile, dict) and profile.get("engine"):
        return profile["engine"]
    return default or engines.DEFAULT


def flag_for(setting, version, engine=engines.DEFAULT):
    """The spelling of ``setting`` in ``engine`` ``version`` (the record's newest entry <= version)."""
    return common.flag_for(engines.get(engine), setting, version)


def choices_for(setting, version, engine=engines.DEFAULT):
    """The values ``engine`` ``version`` accepts for ``setting``, or None: not a choice setting, a
    release before its first row, or not a release version (reported elsewhere)."""
    return common.choices_for(engines.get(engine), setting, version)


def normalised(setting, value):
    """``value`` as the engines see it: the speculative algorithm upper-cased."""
    if setting == "speculative_algorithm" and isinstance(value, str):
        return value.upper()
    return value


def sglang_profile_errors(profiles, name, gpu_count=None, min_accept_len=None,
                          profiles_var="sglang_profiles", name_var="sglang_profile",
                          gpu_var="sglang_hardware.gpu_count",
                          accept_var="sglang_gate_thresholds", nnodes=1, group=None,
                          version=None, engine=None, hardware=None, allow_lossy=False,
                          lossy_var="sglang_allow_lossy_speculation"):
    """Every problem of profile ``name`` in ``profiles``, each naming its variable. [] = valid.
    ``nnodes`` > 1: the profile serves one model over that many hosts (tensor parallel across
    them, ``group`` naming the deployment). ``version``: the engine release whose choices
    (the engine module's choices) the parser and strategy names are checked against (None: the newest row).
    ``engine``: the host's engine (sglang_engine) for a profile without its own ``engine`` key.
    ``hardware``: sglang_hardware (its compute_capability: what the GPUs can run)."""
    if not isinstance(profiles, dict) or not profiles:
        return ["%s must be a non-empty mapping of profile name -> settings" % profiles_var]
    if name not in profiles:
        return ["%s: %r is not defined in %s (defined: %s)"
                % (name_var, name, profiles_var, ", ".join(sorted(profiles)))]
    p = profiles[name]
    var = "%s.%s" % (profiles_var, name)
    if not isinstance(p, dict):
        return ["%s must be a mapping of SGLang settings, got %r" % (var, p)]
    engine = profile_engine(p, engine)
    eng = engines.find(engine)
    if eng is None:
        return ["%s.engine (or sglang_engine) must be one of %s, got %r"
                % (var, ", ".join(engines.names()), engine)]
    errors = []
    for key in sorted(set(p) - set(eng.flags) - set(PROFILE_KEYS)):
        why = settings.BY_NAME[key].absent.get(engine) if key in settings.BY_NAME else None
        if why:
            errors.append("%s.%s has no counterpart in %s: %s" % (var, key, eng.label, why))
        else:
            errors.append("%s.%s: unknown setting (known for %s: %s)"
                          % (var, key, eng.label, ", ".join(sorted(eng.flags))))
    checked = _record_errors(p, var, eng, version)
    errors.extend(checked["errors"])
    algo = normalised("speculative_algorithm", p.get("speculative_algorithm"))
    steps, topk, draft, tp = (checked.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                                   "speculative_num_draft_tokens", "tp_size"))
    spec, draft = eng.spec_errors(p, var, algo, steps, topk, draft, p.get("mamba_cache_strategy"))
    errors.extend(spec)
    errors.extend(drafter.errors(p, var))
    errors.extend(eng.release_errors(p, var, version))
    errors.extend(eng.hardware_errors(p, var, hardware))
    if allow_lossy is not True:
        errors.extend("%s.%s = %s makes speculative decoding lossy: %s. A server that answers "
                      "otherwise than its model passes a speed gate; set it exact, or %s: true to "
                      "deploy it knowingly" % (var, key, value, why, lossy_var)
                      for key, value, why in eng.lossy(p))
    nodes = nnodes if _is_int(nnodes) and nnodes > 1 else 1
    if nodes > 1 and not eng.multinode:
        errors.append("%s runs on %s: multi-node deployment %s (%d nodes) is rendered for SGLang "
                      "only (--nnodes/--node-rank/--dist-init-addr); unset sglang_multinode_group "
                      "or run SGLang" % (var, eng.label, group, nodes))
    elif nodes > 1 and "tp_size" in p and tp is not None and tp % nodes:
        errors.append("%s.tp_size (%d) must be divisible by the %d nodes of multi-node deployment %s "
                      "(SGLang asserts 'tp_size must be divisible by number of nodes')"
                      % (var, tp, nodes, group))
    elif nodes > 1 and p.get("tp_size") is None:
        errors.append("%s sets no tp_size: multi-node deployment %s spreads tensor parallelism over "
                      "its %d nodes, so tp_size must be a multiple of %d" % (var, group, nodes, nodes))
    elif tp is not None and gpu_count is not None and _is_int(gpu_count) and tp // nodes > gpu_count:
        errors.append("%s.tp_size (%d) exceeds the GPUs the host is expected to have (%s = %d)"
                      % (var, tp, gpu_var, gpu_count) if nodes == 1 else
                      "%s.tp_size (%d) over %d nodes puts %d GPUs on each node, more than %s = %d"
                      % (var, tp, nodes, tp // nodes, gpu_var, gpu_count))
    if min_accept_len is not None:
        ceiling = draft if (algo and draft) else 1
        if not _is_num(min_accept_len) or min_accept_len < 0:
            errors.append("%s must be a number >= 0, got %r" % (accept_var, min_accept_len))
        elif min_accept_len > ceiling:
            errors.append("%s (%s) cannot be met by profile %s: the accept length is at most %s "
                          "(%s)" % (accept_var, min_accept_len, name, ceiling,
                                    ("adaptive: the largest candidate steps + 1"
                                     if p.get("speculative_adaptive") is True else eng.accept_ceiling)
                                    if algo else "no speculative decoding"))
    return errors


def accept_ceiling(p, engine=None):
    """The most tokens one verify of profile ``p`` can yield on its engine (the engine module's
    spec_errors: SGLang's draft tokens, vLLM's steps + 1; 1 without speculation)."""
    eng = engines.get(profile_engine(p, engine))
    algo = normalised("speculative_algorithm", p.get("speculative_algorithm"))
    _, ceiling = eng.spec_errors(p, "p", algo, p.get("speculative_num_steps"),
                                 p.get("speculative_eagle_topk"), p.get("speculative_num_draft_tokens"),
                                 p.get("mamba_cache_strategy"))
    return int(ceiling) if algo and ceiling else 1


# A record's check (settings.Setting.check) -> its rule, in the order the preflight reports them.
CHECK_ORDER = ("int", "tokens", "fraction", "share", "name", "choice", "bool", "path")


def _record_errors(p, var, eng, version):
    """Each setting's own rule (its record's check); {"errors": [...], setting: value when valid}."""
    errors, valid = [], {}
    release = version or common.newest_release(eng)
    for check in CHECK_ORDER:
        for s in settings.SETTINGS:
            key, value = s.name, p.get(s.name)
            if s.check != check or value is None:
                continue
            if check == "int" and (not _is_int(value) or value < s.minimum):
                errors.append("%s.%s must be an integer >= %d, got %r" % (var, key, s.minimum, value))
                continue
            if check == "tokens" and (not _is_int(value) or value < 1):
                errors.append("%s.%s must be a positive integer number of tokens, got %r"
                              % (var, key, value))
            elif check == "fraction" and (not _is_num(value) or not 0 < value < 1):
                errors.append("%s.%s must be a fraction strictly between 0 and 1, got %r"
                              % (var, key, value))
            elif check == "share" and (not _is_num(value) or not 0 < value <= 1):
                errors.append("%s.%s must be a number above 0 and at most 1 (1.0: exact), got %r"
                              % (var, key, value))
            elif check in ("name", "choice") and key in eng.flags:
                allowed = choices_for(key, release, eng.name)
                if not isinstance(value, str) or not value:
                    errors.append("%s.%s must be a name such as %s, got %r"
                                  % (var, key, (allowed or ("qwen3",))[-1], value))
                elif allowed is not None and value not in allowed:
                    near = difflib.get_close_matches(value, allowed, 1)
                    # SGLang's argparse: "argument --reasoning-parser: invalid choice: 'qwen_3' (...)"
                    errors.append("%s.%s must be one of %s (%s %s), got %r%s"
                                  % (var, key, ", ".join(allowed), eng.label, release, value,
                                     "; did you mean %s?" % near[0] if near else ""))
            elif check == "bool" and key in eng.flags and not isinstance(value, bool):
                errors.append("%s.%s must be true or false, got %r" % (var, key, value))
            elif check == "path" and not settings.is_host_path(value):
                errors.append("%s.%s must be an absolute path on the host without white space (the "
                              "unit loads it from disk), got %r" % (var, key, value))
            if key in eng.flags and _too_old(eng, key, version):
                errors.append("%s.%s needs %s >= %s (%s is %s)"
                              % (var, key, eng.label, eng.flags[key][0][0], eng.version_var, version))
            valid[key] = value
    return dict(valid, errors=errors)


def _too_old(eng, setting, version):
    """Whether ``version`` (a release; None or unreadable: not judged here) predates ``setting``'s
    first flag in ``eng``."""
    try:
        return version is not None and common.flag_for(eng, setting, version) is None
    except ProfileError:
        return False


LOOPBACK_NAMES = ("localhost",)


def is_loopback(host):
    """127.0.0.0/8, ::1 (bare or in brackets) and localhost."""
    name = str(host).strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


_HOST_NAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$")


def sglang_host_problem(host):
    """Why ``host`` cannot be SGLang's --host (uvicorn binds it once the model has loaded), or ''
    when it can: an IP address (IPv6 bare or in brackets) or a DNS name, without a port."""
    name = str(host).strip()
    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
        return ""
    except ValueError:
        pass
    if _HOST_NAME.match(name):
        return ""
    m = re.match(r"^(\[[0-9A-Fa-f:.]+\]|[^:\[\]]+):(\d+)$", name)
    if m:
        return "it carries a port (%s): give the address alone, the port in sglang_port" % m.group(2)
    if "://" in name:
        return "a URL, not an address: give the address alone, the port in sglang_port"
    return "neither an IP address nor a host name"


def sglang_exposure_errors(host, api_key_set, allowed_networks, allow_open_network):
    """The bind address: one SGLang can bind (sglang_host_problem), and beyond loopback a key, a
    firewall or an explicit opt-in. Takes whether a key is set, never the key. [] = acceptable."""
    bad = sglang_host_problem(host)
    if bad:
        return ["sglang_host = %s is not valid: an IP address or host name to bind, without a port "
                "(127.0.0.1 for loopback only); %s" % (host, bad)]
    if is_loopback(host) or api_key_set or allowed_networks or allow_open_network:
        return []
    return ["sglang_host = %s binds beyond loopback (127.0.0.0/8, ::1, localhost) with no API key and "
            "no firewall: set sglang_api_key (from the vault: vault_sglang_api_key), or "
            "sglang_allowed_networks (the CIDR networks the port admits), or "
            "sglang_allow_open_network: true to serve every network without a key on purpose" % host]



def sglang_argv(profile, version, server=None, engine=None):
    """Argv (without the interpreter and ``-m <module>``) for ``engine`` ``version``, rendered by
    the engine module (engines/sglang.py: profile flags in record order, then the server
    settings; engines/vllm.py: ``serve MODEL`` first, the speculative pair as one JSON).
    ``engine``: the host's engine for a profile without its own ``engine`` key (default sglang)."""
    if not isinstance(profile, dict):
        raise ProfileError("sglang_argv: the profile must be a mapping, got %r" % (profile,))
    eng = engines.get(profile_engine(profile, engine))
    unknown = sorted(set(profile) - set(eng.flags) - set(PROFILE_KEYS))
    if unknown:
        raise ProfileError("sglang_argv: profile settings %s are unknown to %s"
                           % (", ".join(unknown), eng.label))
    return eng.render(profile, version, dict(server or {}))


def engine_drift(answers, engine, profile, version, server=None):
    """The drift of a running ``engine`` from its answers to the engine's ``drift_paths`` (the uri
    results of roles/sglang/tasks/drift.yml, in that order), read by the engine module."""
    return engines.get(engine).drift_from(list(answers), profile, version, server)


def sglang_command_profile(unit, version):
    """What an engine command line sets (``unit``: an entry of the sglang_units module's result,
    with ``argv``, ``engine`` and ``args_from``, the index of its first engine argument), read with
    that engine's flags: {"engine", "profile": {setting: value}, "server": {setting: value},
    "unknown": [flags the records do not know, with their values]}. Every spelling a record has
    known is read (an old unit may use --mamba-scheduler-strategy); ``--flag=value`` too; the
    engine module reads its own forms (vLLM: the positional model after ``serve``,
    --speculative-config's JSON, --no-<flag> as false)."""
    eng = engines.find(unit.get("engine"))
    if eng is None:
        return {"engine": unit.get("engine"), "profile": {}, "server": {}, "unknown": []}
    return common.read_command(eng, [str(w) for w in unit["argv"][unit["args_from"]:]])


def _shown(value):
    return "unset" if value is None else _text(value)


def sglang_profile_diff(found, profile):
    """The settings where a command line (``found``: sglang_command_profile's "profile") and the
    intended ``profile`` differ, as "setting intended vs found" ("speculative_num_steps 3 vs 1",
    "mem_fraction_static 0.88 vs unset"), in the records' order. The speculative algorithm's case
    does not count, nor a name the profile's engine takes as the same (vLLM: NEXTN and MTP)."""
    lines = []
    eng = engines.find(profile.get("engine"), _SGLANG)
    for setting in settings.BY_NAME:
        want, have = profile.get(setting), found.get(setting)
        if setting == "speculative_algorithm" and isinstance(want, str) and isinstance(have, str):
            if eng.same_algorithm(want, have):
                continue
        if want is None and have is None or (want is not None and have is not None and _same(want, have)):
            continue
        lines.append("%s %s vs %s" % (setting, _shown(want), _shown(have)))
    return lines
