# -*- coding: utf-8 -*-
"""What every engine module does the same way with its own tables: a setting's flag and choices
for a release, the server settings' argv, and a command line read back into settings."""
from __future__ import annotations

import re

from .settings import ProfileError, of, text, typed, version_tuple

# Shown as the method when speculation runs but the engine does not say which.
UNREPORTED = "unreported"


def flag_for(eng, setting, version):
    """The spelling of ``setting`` in ``eng``'s ``version`` (the record's newest entry <= version)."""
    v = version_tuple(version, eng.version_var)
    if v < version_tuple(eng.oldest):
        raise ProfileError("%s: %s is older than %s, the oldest %s release the flag table in "
                           "plugins/filter/sglang_profile.py knows"
                           % (eng.version_var, version, eng.oldest, eng.label))
    chosen = None
    for since, flag in eng.flags[setting]:
        if version_tuple(since) <= v:
            chosen = flag
    return chosen


def row_for(rows, version):
    """The value of the newest (first release, value) row of ``rows`` (oldest first) at or below
    ``version``; None before the first row, or for what is not a release version (reported
    elsewhere)."""
    try:
        v = version_tuple(version)
    except ProfileError:
        return None
    chosen = None
    for since, value in rows:
        if version_tuple(since) <= v:
            chosen = value
    return chosen


def choices_for(eng, setting, version):
    """The values ``eng`` ``version`` accepts for ``setting``, or None: not a choice setting, a
    release before its first row, or not a release version (reported elsewhere)."""
    return row_for(eng.choices.get(setting, ()), version)


def newest_release(eng):
    """The newest release ``eng``'s choice tables have a row for (its oldest without any)."""
    return max((rows[-1][0] for rows in eng.choices.values()), key=version_tuple, default=eng.oldest)


def server_argv(eng, server, ignored=()):
    argv = []
    for key, value in server.items():
        if key in ignored:
            continue
        if key not in eng.server_flags:
            raise ProfileError("sglang_argv: server setting %r has no %s flag (known: %s)"
                               % (key, eng.label, ", ".join(sorted(eng.server_flags))))
        if value is None or value is False or value == "":
            continue
        if value is True:
            argv.append(eng.server_flags[key])
        else:
            argv += [eng.server_flags[key], text(value)]
    return argv


BOOL_SERVER_SETTINGS = ("trust_remote_code", "enable_metrics")


def flag_index(eng):
    """Every spelling ``eng``'s records have known -> ("profile"|"server", setting); a boolean
    setting's --no-<flag> too."""
    by_flag = {}
    for s in of(eng.name):
        for _, flag in s.flags[eng.name]:
            by_flag[flag] = ("profile", s.name)
            if s.type == "bool":
                by_flag["--no-" + flag[2:]] = ("profile", s.name)
    for setting, flag in eng.server_flags.items():
        by_flag[flag] = ("server", setting)
    by_flag[eng.model_flag] = ("server", "model_path")
    return by_flag


def read_command(eng, words):
    """{"profile", "server", "unknown"} of an engine's arguments ``words`` (see
    sglang_perf.plan.profile.sglang_command_profile); ``eng`` supplies its aliases, the flags its
    renderer implies, its positional model and how it reads a combined flag (read_special)."""
    out = {"engine": eng.name, "profile": {}, "server": {}, "unknown": []}
    by_flag = flag_index(eng)
    words = eng.read_positional(list(words), out)
    bools = {s.name for s in of(eng.name) if s.type == "bool"}
    i = 0
    while i < len(words):
        word = words[i]
        flag, eq, inline = word.partition("=")
        flag = eng.aliases.get(flag, flag)
        known = by_flag.get(flag)
        takes = not eq and i + 1 < len(words) and not words[i + 1].startswith("--")
        if known is None:
            if flag in eng.implied:
                i += 2 if takes and eng.implied[flag] else 1
            elif word.startswith("-"):
                out["unknown"].append(word + (" " + words[i + 1] if takes else ""))
                i += 2 if takes else 1
            else:
                out["unknown"].append(word)  # a positional argument the engine would refuse
                i += 1
            continue
        where, setting = known
        if where == "server" and setting in BOOL_SERVER_SETTINGS and not eq:
            out[where][setting] = True
            i += 1
            continue
        if where == "profile" and setting in bools:
            out["profile"][setting] = not flag.startswith("--no-")
            i += 1
            continue
        if eq:
            value, i = inline, i + 1
        elif i + 1 < len(words):
            value, i = words[i + 1], i + 2
        else:
            value, i = None, i + 1
        special = eng.read_special(flag, value, out["unknown"])
        if special is not None:
            out["profile"].update(special)
        else:
            out[where][setting] = typed(setting, value) if where == "profile" else value
    return out


def positions(per_pos):
    """A BY_LABEL position counter as a list by position (0, 1, ...), or None."""
    if not isinstance(per_pos, dict) or not per_pos:
        return None
    try:
        keys = sorted(int(k) for k in per_pos)
    except (TypeError, ValueError):
        return None
    return [per_pos.get(str(k), 0.0) for k in range(keys[-1] + 1)] if keys[0] >= 0 else None


def fill_spec_steps(eng, server, spec_tokens):
    """For an engine drafting one token per step: num_speculative_tokens (``spec_tokens`` where
    discovery lacked it) is the draft steps; a method the server does not name is UNREPORTED."""
    if not server.get("num_speculative_tokens"):
        server["num_speculative_tokens"] = spec_tokens
    server["speculative_num_steps"] = server["num_speculative_tokens"]
    if not server.get("speculative_algorithm"):
        server["speculative_algorithm"] = UNREPORTED
        server.setdefault("not_exposed", {})["speculative_algorithm"] = \
            eng.not_exposed["speculative_algorithm"]


# --- the Prometheus text format (metrics.py and the engines' drift read it) ---------------------
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def exposition_sample(line):
    """(name, labels, value) of one exposition line, or None."""
    m = _NAME.match(line)
    if not m:
        return None
    name, pos, labels = m.group(0), m.end(), {}
    if line.startswith("{", pos):
        pos += 1
        while True:
            lm = _LABEL.match(line, pos)
            if not lm:
                break
            labels[lm.group(1)] = re.sub(r'\\[\\"n]', lambda e: _ESCAPES[e.group(0)], lm.group(2))
            pos = lm.end()
        pos = len(line) - len(line[pos:].lstrip())
        if not line.startswith("}", pos):
            return None
        pos += 1
    rest = line[pos:].split()
    try:
        return name, labels, float(rest[0])
    except (IndexError, ValueError):
        return None


def info_labels(text, name):
    """The labels of the first sample of the info gauge ``name`` in a Prometheus exposition
    ``text`` (engine 0's), {} when it has none."""
    for line in str(text or "").splitlines():
        if line.startswith(name):
            s = exposition_sample(line)
            if s is not None and s[0] == name:
                return s[1]
    return {}

