# -*- coding: utf-8 -*-
"""Filters: an SGLang launch profile -> validated argv for the installed SGLang version.

The unit template stays dumb: it joins what ``sglang_argv`` returns. Flag names per SGLang version
live in one table (FLAGS) instead of version ``if`` branches in templates; ``sglang_profile_errors``
refuses inconsistent profiles before any host changes, naming the variable and the rule (SGLang
itself raises a bare AssertionError or TypeError for several of these, at start-up, minutes into
a model load).
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: sglang_profile
short_description: SGLang launch profile to argv, and profile validation
description:
  - C(sglang_argv) renders a profile (a dict of SGLang server settings) plus server settings to the
    argv of the given SGLang version.
  - C(sglang_profile_errors) returns the list of problems of a profile (empty when it is valid).
  - C(systemd_exec_args) quotes an argv for a systemd C(ExecStart=) line.
  - C(sglang_drift) compares a running server's C(/server_info) with the intended profile.
  - C(sglang_host_problem) says why a value cannot be bound as SGLang's C(--host) (empty when it can).
  - C(sglang_exposure_errors) refuses a server bound beyond loopback with neither an API key, nor
    allowed networks, nor an explicit opt-in to an open network.
"""

import difflib
import ipaddress
import re

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # used without Ansible (tests, the bench CLI)
    AnsibleFilterError = ValueError

# Profile setting -> [(first SGLang version with this spelling, flag)], oldest first.
# Checked in the released wheels: 0.5.10-0.5.13 have only --mamba-scheduler-strategy; 0.5.14-0.5.19
# add --mamba-radix-cache-strategy and keep the old name as a deprecated alias; 0.5.23 rejects the
# old name ("unrecognized arguments").
FLAGS = {
    "speculative_algorithm": [("0.5.10", "--speculative-algorithm")],
    "speculative_num_steps": [("0.5.10", "--speculative-num-steps")],
    "speculative_eagle_topk": [("0.5.10", "--speculative-eagle-topk")],
    "speculative_num_draft_tokens": [("0.5.10", "--speculative-num-draft-tokens")],
    "tp_size": [("0.5.10", "--tp-size")],
    "mem_fraction_static": [("0.5.10", "--mem-fraction-static")],
    "context_length": [("0.5.10", "--context-length")],
    "max_running_requests": [("0.5.10", "--max-running-requests")],
    "mamba_full_memory_ratio": [("0.5.10", "--mamba-full-memory-ratio")],
    "mamba_cache_strategy": [("0.5.10", "--mamba-scheduler-strategy"),
                             ("0.5.14", "--mamba-radix-cache-strategy")],
    "reasoning_parser": [("0.5.10", "--reasoning-parser")],
    "tool_call_parser": [("0.5.10", "--tool-call-parser")],
}
OLDEST = "0.5.10"

# Server settings (not part of a profile), rendered after the profile.
SERVER_FLAGS = {
    "model_path": "--model-path",
    "served_model_name": "--served-model-name",
    "host": "--host",
    "port": "--port",
    "trust_remote_code": "--trust-remote-code",
    "enable_metrics": "--enable-metrics",
    "config": "--config",
    # multi-node deployments only (plugins/filter/sglang_fleet.py sglang_topology)
    "nnodes": "--nnodes",
    "node_rank": "--node-rank",
    "dist_init_addr": "--dist-init-addr",
}

# SGLang upper-cases the name (speculative_hook.py handle_speculative_decoding,
# spec_info.py SpeculativeAlgorithm.from_string): any case is accepted and rendered upper-case.
SPEC_ALGORITHMS = ("NEXTN", "EAGLE", "EAGLE3", "STANDALONE", "NGRAM", "DFLASH", "DSPARK", "UNO")
MAMBA_STRATEGIES = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")

# Profile settings SGLang's argparse limits to a list: [(first release with this list, choices)],
# oldest first, as FLAGS; a release uses the newest row <= it. Read from each release's parser
# (server_args.py add_cli_args: "auto" + srt/parser/reasoning_parser_names.py and
# srt/function_call/parser_names.py in 0.5.23, the parser classes' registries in 0.5.19);
# tests/test_contract.py holds the rows of SGLANG_VERSION and of the older release against their
# own parsers. Releases before a setting's first row are only checked for a non-empty name.
CHOICES = {
    "reasoning_parser": [
        ("0.5.19", (
            "auto", "apertus2509", "deepseek-r1", "deepseek-v3", "deepseek-v4", "dots", "glm45", "ling3",
            "hunyuan", "gpt-oss", "kimi", "kimi_k2", "kimi_k3", "mimo", "muse", "poolside_v1", "qwen3",
            "qwen3-thinking", "minimax", "minimax-append-think", "minimax-m3", "step3", "step3p5",
            "mistral", "nemotron_3", "interns1", "gemma4", "inkling", "cohere_command4")),
        ("0.5.23", (
            "auto", "apertus2509", "beam", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41",
            "dots", "glm45", "ling3", "hunyuan", "gpt-oss", "k2_horizon", "kimi", "kimi_k2", "kimi_k3",
            "mimo", "muse", "poolside_v1", "qwen3", "qwen3-thinking", "minimax", "minimax-append-think",
            "minimax-m3", "nanbeige", "step3", "step3p5", "mistral", "nemotron_3",
            "granite_thinking_parser", "interns1", "gemma4", "inkling", "iquest_q1", "cohere_command4",
            "gigachat35", "response_template")),
    ],
    "tool_call_parser": [
        ("0.5.19", (
            "auto", "apertus2509", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32",
            "deepseekv4", "dots", "glm", "glm45", "glm47", "gpt-oss", "kimi_k2", "kimi_k3", "lfm2",
            "ling3", "llama3", "mimo", "minicpm5", "mistral", "muse", "poolside_v1", "pythonic", "qwen",
            "qwen25", "qwen3_coder", "spark25", "step3", "step3p5", "minimax-m2", "minimax-m3", "trinity",
            "interns1", "hermes", "hunyuan", "gigachat3", "gemma4", "inkling")),
        ("0.5.23", (
            "auto", "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32",
            "deepseekv4", "deepseekv41", "dots", "glm", "glm45", "glm47", "gpt-oss", "k2_horizon",
            "kimi_k2", "kimi_k3", "lfm2", "ling3", "llama3", "mimo", "minicpm5", "mistral", "muse",
            "poolside_v1", "pythonic", "qwen", "qwen25", "qwen3_coder", "spark25", "step3", "step3p5",
            "minimax-m2", "minimax-m3", "nanbeige", "trinity", "interns1", "hermes", "hunyuan",
            "gigachat3", "gigachat35", "gemma4", "inkling", "iquest_q1", "response_template")),
    ],
    "mamba_cache_strategy": [("0.5.10", MAMBA_STRATEGIES)],
}
MAMBA_TRACK_INTERVAL = 256  # SGLang's default; extra_buffer needs it >= draft tokens


def version_tuple(version, var="sglang_version"):
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?$", str(version).strip())
    if not m:
        raise AnsibleFilterError("%s: %r is not an SGLang release version such as 0.5.23"
                                 % (var, version))
    return tuple(int(x or 0) for x in m.groups())


def flag_for(setting, version):
    """The spelling of ``setting`` in SGLang ``version`` (the table's newest entry <= version)."""
    v = version_tuple(version)
    if v < version_tuple(OLDEST):
        raise AnsibleFilterError("sglang_version: %s is older than %s, the oldest release the flag "
                                 "table in plugins/filter/sglang_profile.py knows" % (version, OLDEST))
    chosen = None
    for since, flag in FLAGS[setting]:
        if version_tuple(since) <= v:
            chosen = flag
    return chosen


def choices_for(setting, version):
    """The values SGLang ``version`` accepts for ``setting`` (CHOICES), or None: not a choice
    setting, a release before its first row, or not a release version (reported elsewhere)."""
    try:
        v = version_tuple(version)
    except AnsibleFilterError:
        return None
    chosen = None
    for since, values in CHOICES.get(setting, ()):
        if version_tuple(since) <= v:
            chosen = values
    return chosen


def normalised(setting, value):
    """``value`` as SGLang sees it: the speculative algorithm upper-cased."""
    if setting == "speculative_algorithm" and isinstance(value, str):
        return value.upper()
    return value


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_num(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def sglang_profile_errors(profiles, name, gpu_count=None, min_accept_len=None,
                          profiles_var="sglang_profiles", name_var="sglang_profile",
                          gpu_var="nvidia_gpu_expected_count",
                          accept_var="sglang_gate_min_accept_len", nnodes=1, group=None,
                          version=None):
    """Every problem of profile ``name`` in ``profiles``, each naming its variable. [] = valid.
    ``nnodes`` > 1: the profile serves one model over that many hosts (tensor parallel across
    them, ``group`` naming the deployment). ``version``: the SGLang release whose choices
    (CHOICES) the parser and strategy names are checked against (None: the newest row)."""
    if not isinstance(profiles, dict) or not profiles:
        return ["%s must be a non-empty mapping of profile name -> settings" % profiles_var]
    if name not in profiles:
        return ["%s: %r is not defined in %s (defined: %s)"
                % (name_var, name, profiles_var, ", ".join(sorted(profiles)))]
    p = profiles[name]
    var = "%s.%s" % (profiles_var, name)
    if not isinstance(p, dict):
        return ["%s must be a mapping of SGLang settings, got %r" % (var, p)]
    errors = []
    for key in sorted(set(p) - set(FLAGS)):
        errors.append("%s.%s: unknown setting (known: %s)" % (var, key, ", ".join(sorted(FLAGS))))

    def int_at_least(key, minimum):
        value = p.get(key)
        if value is not None and (not _is_int(value) or value < minimum):
            errors.append("%s.%s must be an integer >= %d, got %r" % (var, key, minimum, value))
            return None
        return value

    algo = normalised("speculative_algorithm", p.get("speculative_algorithm"))
    steps = int_at_least("speculative_num_steps", 1)
    topk = int_at_least("speculative_eagle_topk", 1)
    draft = int_at_least("speculative_num_draft_tokens", 2)
    tp = int_at_least("tp_size", 1)
    int_at_least("max_running_requests", 1)
    ctx = p.get("context_length")
    if ctx is not None and (not _is_int(ctx) or ctx < 1):
        errors.append("%s.context_length must be a positive integer number of tokens, got %r"
                      % (var, ctx))
    for key in ("mem_fraction_static", "mamba_full_memory_ratio"):
        value = p.get(key)
        if value is not None and (not _is_num(value) or not 0 < value < 1):
            errors.append("%s.%s must be a fraction strictly between 0 and 1, got %r"
                          % (var, key, value))
    strategy = p.get("mamba_cache_strategy")
    release = version or max((rows[-1][0] for rows in CHOICES.values()), key=version_tuple)
    for key in ("reasoning_parser", "tool_call_parser", "mamba_cache_strategy"):
        value, allowed = p.get(key), choices_for(key, release)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            errors.append("%s.%s must be a name such as %s, got %r"
                          % (var, key, (allowed or ("qwen3",))[-1], value))
        elif allowed is not None and value not in allowed:
            near = difflib.get_close_matches(value, allowed, 1)
            # SGLang's argparse: "argument --reasoning-parser: invalid choice: 'qwen_3' (choose from ...)"
            errors.append("%s.%s must be one of %s (SGLang %s), got %r%s"
                          % (var, key, ", ".join(allowed), release, value,
                             "; did you mean %s?" % near[0] if near else ""))

    spec_keys = [k for k in ("speculative_num_steps", "speculative_eagle_topk",
                             "speculative_num_draft_tokens") if p.get(k) is not None]
    if algo is None:
        if spec_keys:
            errors.append("%s sets %s without speculative_algorithm: SGLang ignores them; set "
                          "speculative_algorithm: NEXTN or remove them" % (var, ", ".join(spec_keys)))
    elif algo not in SPEC_ALGORITHMS:
        errors.append("%s.speculative_algorithm must be one of %s, got %r (SGLang fails at start-up "
                      "with 'Unknown speculative algorithm name')"
                      % (var, ", ".join(SPEC_ALGORITHMS), algo))
    else:
        missing = [k for k in ("speculative_num_steps", "speculative_eagle_topk",
                               "speculative_num_draft_tokens") if p.get(k) is None]
        if missing:
            errors.append("%s: speculative_algorithm %s needs %s too (the seeds' launch with draft "
                          "tokens but no steps died on SGLang's bare AssertionError; steps without "
                          "topk is a TypeError)" % (var, algo, ", ".join("%s.%s" % (var, k)
                                                                         for k in missing)))
        if steps and topk == 1 and draft and draft != steps + 1:
            errors.append("%s.speculative_num_draft_tokens must be speculative_num_steps + 1 = %d "
                          "when speculative_eagle_topk is 1, got %d (SGLang silently overrides it)"
                          % (var, steps + 1, draft))
        if draft and strategy in ("extra_buffer", "extra_buffer_lazy") and \
                draft > MAMBA_TRACK_INTERVAL:
            errors.append("%s.speculative_num_draft_tokens (%d) must not exceed the mamba track "
                          "interval (%d) with mamba_cache_strategy %s"
                          % (var, draft, MAMBA_TRACK_INTERVAL, strategy))
    nodes = nnodes if _is_int(nnodes) and nnodes > 1 else 1
    if nodes > 1 and "tp_size" in p and tp is not None and tp % nodes:
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
                                    "speculative_num_draft_tokens" if algo else
                                    "no speculative decoding"))
    return errors


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


def sglang_argv(profile, version, server=None):
    """Argv (without the interpreter) for SGLang ``version``: profile flags in table order, then
    the server settings. Booleans render as bare flags when true and are omitted when false."""
    if not isinstance(profile, dict):
        raise AnsibleFilterError("sglang_argv: the profile must be a mapping, got %r" % (profile,))
    argv = []
    for setting in FLAGS:
        value = profile.get(setting)
        if value is None:
            continue
        argv += [flag_for(setting, version), _text(normalised(setting, value))]
    unknown = sorted(set(profile) - set(FLAGS))
    if unknown:
        raise AnsibleFilterError("sglang_argv: unknown profile settings %s" % ", ".join(unknown))
    for key, value in (server or {}).items():
        if key not in SERVER_FLAGS:
            raise AnsibleFilterError("sglang_argv: unknown server setting %r (known: %s)"
                                     % (key, ", ".join(sorted(SERVER_FLAGS))))
        if value is None or value is False or value == "":
            continue
        if value is True:
            argv.append(SERVER_FLAGS[key])
        else:
            argv += [SERVER_FLAGS[key], _text(value)]
    return argv


# How SGLang reports a setting after resolving it (ServerArgs post-init): NEXTN runs as EAGLE.
SPEC_REPORTED_AS = {"NEXTN": "EAGLE"}
# Server settings compared by the drift check (never api_key or config: secrets).
DRIFT_SERVER_SETTINGS = ("model_path", "served_model_name", "port")
SGLANG_SPEC_MAX_RUNNING_REQUESTS = 48  # SGLang's value when speculation runs and it is unset


def _same(a, b):
    if _is_num(a) and _is_num(b):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(a)))
    return a == b


def _running_field(setting, info, version):
    """The /server_info key of ``setting``: its spelling in the running version, else any known."""
    names = []
    try:
        names.append(flag_for(setting, version))
    except AnsibleFilterError:
        pass
    names += [flag for _, flag in reversed(FLAGS[setting])]
    for flag in names:
        field = flag.lstrip("-").replace("-", "_")
        if field in info:
            return field
    return names[0].lstrip("-").replace("-", "_")


def sglang_drift(server_info, profile, version, server=None):
    """What a running SGLang reports at /server_info against the intended profile and server
    settings, after SGLang's own normalisation (NEXTN reported as EAGLE; draft tokens = steps + 1
    and max_running_requests = 48 when speculation leaves them unset). Returns differences (each
    named, intended vs running), the settings the profile leaves to SGLang with the value it
    chose, and one readable line per difference."""
    if not isinstance(server_info, dict):
        raise AnsibleFilterError("sglang_drift: /server_info did not return a JSON object: %r"
                                 % (server_info,))
    if not isinstance(profile, dict):
        raise AnsibleFilterError("sglang_drift: the profile must be a mapping, got %r" % (profile,))
    running_version = server_info.get("version") or version
    try:
        version_tuple(running_version)
    except AnsibleFilterError:
        running_version = version
    algo = normalised("speculative_algorithm", profile.get("speculative_algorithm"))
    steps, topk = profile.get("speculative_num_steps"), profile.get("speculative_eagle_topk")
    differences, chosen, checked = [], [], 0
    for setting in FLAGS:
        field = _running_field(setting, server_info, running_version)
        intended, note = normalised(setting, profile.get(setting)), ""
        running = server_info.get(field)
        if setting.startswith("speculative_") and setting != "speculative_algorithm" and not algo:
            continue  # no speculation intended: speculative_algorithm itself says so
        if setting == "speculative_algorithm":
            if intended in SPEC_REPORTED_AS:
                note = "%s is reported as %s" % (intended, SPEC_REPORTED_AS[intended])
                intended = SPEC_REPORTED_AS[intended]
            if isinstance(running, str):
                running = SPEC_REPORTED_AS.get(running.upper(), running.upper())
        elif intended is None and setting == "speculative_num_draft_tokens" and steps and topk in (None, 1):
            intended, note = steps + 1, "unset: SGLang uses speculative_num_steps + 1"
        elif intended is None and setting == "max_running_requests" and algo:
            intended, note = SGLANG_SPEC_MAX_RUNNING_REQUESTS, "unset: SGLang uses 48 with speculation"
        if intended is None and setting != "speculative_algorithm":
            if field in server_info:
                chosen.append({"setting": setting, "field": field, "running": running})
            continue
        checked += 1
        if field not in server_info:
            differences.append({"setting": setting, "field": field, "intended": intended,
                                "running": None, "note": "not reported by the server"})
        elif not _same(intended, running):
            differences.append({"setting": setting, "field": field, "intended": intended,
                                "running": running, "note": note})
    for key in DRIFT_SERVER_SETTINGS:
        intended = (server or {}).get(key)
        if intended is None:
            continue
        checked += 1
        running = server_info.get(key)
        if key == "port" and running is not None:
            intended, running = int(intended), int(running)
        if not _same(intended, running):
            differences.append({"setting": key, "field": key, "intended": intended,
                                "running": running, "note": ""})
    lines = ["%s: intended %s, running %s%s" % (
        d["setting"], "none" if d["intended"] is None else d["intended"],
        "none" if d["running"] is None else d["running"], " (%s)" % d["note"] if d["note"] else "")
        for d in differences]
    return {"differences": differences, "chosen_by_sglang": chosen, "checked": checked,
            "running_version": server_info.get("version"), "lines": lines}


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_SAFE = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def systemd_exec_args(argv):
    """Join argv for ExecStart=: safe words bare, others double-quoted with systemd's escapes."""
    out = []
    for arg in argv:
        arg = str(arg)
        if _SAFE.match(arg):
            out.append(arg)
        else:
            escaped = arg.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$") \
                .replace("%", "%%").replace("\n", "\\n")
            out.append('"%s"' % escaped)
    return " ".join(out)


# --- Reading a command line back into a profile (brownfield takeover) ---------------------------
INT_SETTINGS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
                "tp_size", "context_length", "max_running_requests")
FLOAT_SETTINGS = ("mem_fraction_static", "mamba_full_memory_ratio")
BOOL_SERVER_SETTINGS = ("trust_remote_code", "enable_metrics")
# SGLang's second spellings of flags the table renders (server_args.py add_argument aliases).
FLAG_ALIASES = {"--tensor-parallel-size": "--tp-size", "--model": "--model-path"}


def _typed(setting, value):
    try:
        if setting in INT_SETTINGS:
            return int(value)
        if setting in FLOAT_SETTINGS:
            return float(value)
    except (TypeError, ValueError):
        pass
    return value


def sglang_command_profile(unit, version):
    """What an SGLang command line sets (``unit``: an entry of the sglang_units module's result,
    with ``argv``, ``engine`` and ``args_from``, the index of its first engine argument), read with
    the flag table: {"engine", "profile": {setting: value}, "server": {setting: value},
    "unknown": [flags the table does not know, with their values]}. Every spelling the table has
    known is read (an old unit may use --mamba-scheduler-strategy); ``--flag=value`` too."""
    out = {"engine": unit.get("engine"), "profile": {}, "server": {}, "unknown": []}
    if out["engine"] != "sglang":
        return out
    by_flag = {}
    for setting, spellings in FLAGS.items():
        for _, flag in spellings:
            by_flag[flag] = ("profile", setting)
    for setting, flag in SERVER_FLAGS.items():
        by_flag[flag] = ("server", setting)
    words = [str(w) for w in unit["argv"][unit["args_from"]:]]
    i = 0
    while i < len(words):
        word = words[i]
        flag, eq, inline = word.partition("=")
        known = by_flag.get(FLAG_ALIASES.get(flag, flag))
        if known is None:
            if word.startswith("-"):
                takes = not eq and i + 1 < len(words) and not words[i + 1].startswith("--")
                out["unknown"].append(word + (" " + words[i + 1] if takes else ""))
                i += 2 if takes else 1
            else:
                out["unknown"].append(word)  # a positional argument SGLang would refuse
                i += 1
            continue
        where, setting = known
        if where == "server" and setting in BOOL_SERVER_SETTINGS and not eq:
            out[where][setting] = True
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 2
        else:
            value, i = None, i + 1
        out[where][setting] = _typed(setting, value) if where == "profile" else value
    return out


def _shown(value):
    return "unset" if value is None else _text(value)


def sglang_profile_diff(found, profile):
    """The settings where a command line (``found``: sglang_command_profile's "profile") differs
    from the intended ``profile``, as "setting intended vs found" ("speculative_num_steps 3 vs 1",
    "mem_fraction_static 0.88 vs unset"), in the flag table's order. SGLang upper-cases the
    speculative algorithm, so its case does not count."""
    lines = []
    for setting in FLAGS:
        want, have = profile.get(setting), found.get(setting)
        if setting == "speculative_algorithm" and isinstance(want, str) and isinstance(have, str):
            if want.upper() == have.upper():
                continue
        if want is None and have is None or (want is not None and have is not None and _same(want, have)):
            continue
        lines.append("%s %s vs %s" % (setting, _shown(want), _shown(have)))
    return lines


class FilterModule(object):
    def filters(self):
        return {
            "sglang_argv": sglang_argv,
            "sglang_profile_errors": sglang_profile_errors,
            "systemd_exec_args": systemd_exec_args,
            "sglang_drift": sglang_drift,
            "sglang_command_profile": sglang_command_profile,
            "sglang_profile_diff": sglang_profile_diff,
            "sglang_exposure_errors": sglang_exposure_errors,
            "sglang_host_problem": sglang_host_problem,
        }
