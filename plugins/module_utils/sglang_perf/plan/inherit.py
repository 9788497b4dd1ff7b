# -*- coding: utf-8 -*-
"""Profiles and thresholds that inherit (docs/profiles-and-engines.md, Profiles that inherit).

A profile of sglang_profiles may say ``base: OTHER`` and state only what differs from OTHER (its
settings over the base's, key by key; chains allowed; a setting set to null in a profile with a
base removes the base's, leaving it to the engine's default). A profile without thresholds of its own
for a case of the gate plan takes its base's for that case: per case, not per key, so a profile
that states a case states all of that case's thresholds (and ``{}`` measures it unjudged).
sglang_gate_calibrated is not inherited: it holds one profile's own measurements.

``resolve`` is the one place this happens (and, given the model directory, where each drafter is
placed); the deploy plan calls it once and every consumer reads its flat result. Standard library only."""
from __future__ import annotations

from . import drafter

PROFILES_VAR = "sglang_profiles"
HOST_PROFILES_VAR = "sglang_host_profiles"
HOST_THRESHOLDS_VAR = "sglang_gate_host_thresholds"


def _case_form(entry):
    """True for thresholds in the per-case form {case: {threshold: figure}} (each case a mapping)."""
    return isinstance(entry, dict) and all(isinstance(c, dict) for c in entry.values())


def _base_problem(profiles, name, base):
    """Why ``base`` cannot be the base of profile ``name`` (None: it can)."""
    if base == name:
        return "%s.%s.base names the profile itself" % (PROFILES_VAR, name)
    if not isinstance(base, str) or not isinstance(profiles.get(base), dict):
        return "%s.%s.base = %r: no such profile in %s (known: %s)" % (
            PROFILES_VAR, name, base, PROFILES_VAR, ", ".join(sorted(map(str, profiles))))
    return None


def with_host(profiles, thresholds, host_profiles=None, host_thresholds=None):
    """(profiles, thresholds) with a host's own over them by name: sglang_host_profiles and
    sglang_gate_host_thresholds (e.g. the tuner's winner in the host's host_vars, a profile with
    a ``base`` in the inventory's profiles), so the inventory's own stay whole. What is not a
    mapping passes through for the checks that name it."""
    if isinstance(profiles, dict) and isinstance(host_profiles, dict) and host_profiles:
        profiles = dict(profiles, **host_profiles)
    if isinstance(host_thresholds, dict) and host_thresholds:
        thresholds = dict(thresholds if isinstance(thresholds, dict) else {}, **host_thresholds)
    return profiles, thresholds


def of_vars(v, model_dir=True):
    """resolve() of a host's variables ``v``: sglang_profiles and sglang_gate_thresholds with the
    host's own over them (with_host), drafters placed under sglang_model_dir."""
    profiles, thresholds = with_host(v.get(PROFILES_VAR), v.get("sglang_gate_thresholds"),
                                     v.get(HOST_PROFILES_VAR), v.get(HOST_THRESHOLDS_VAR))
    return resolve(profiles, thresholds, v.get("sglang_model_dir") if model_dir else None)


def resolve(profiles, thresholds=None, model_dir=None):
    """(flat profiles, flat thresholds, problems).

    With ``model_dir`` (sglang_model_dir) each flat profile's drafter is placed too
    (drafter.place: its speculative_draft_model_path derived from its draft_model).

    Each profile comes out with its bases' settings under its own and no ``base`` key; a profile
    whose bases do not resolve keeps its own settings, and a problem names it (or the cycle its
    bases form). Each profile's thresholds are its base's cases under its own cases. What is not
    in the shape inheritance reads (a profile or a thresholds entry that is not a mapping, the
    thresholds of a profile that does not exist) passes through unchanged for the checks that
    name it. Linear in the number of profiles, however long a chain."""
    if not isinstance(profiles, dict):
        return profiles, thresholds, []
    given = thresholds if isinstance(thresholds, dict) else {}
    flat, flat_thresholds, problems, done = {}, dict(given), [], {}  # done: name -> resolved?

    def settle(name, base_ok):
        own = profiles[name]
        base = own.get("base")
        merged = dict(flat[base]) if base_ok else {}
        merged.update(own)
        if "base" in own:
            merged = {k: val for k, val in merged.items() if k != "base" and val is not None}
        flat[name] = merged
        inherited = flat_thresholds.get(base) if base_ok and _case_form(flat_thresholds.get(base)) else None
        if inherited is not None and (name not in given or _case_form(given[name])):
            flat_thresholds[name] = {**inherited, **given.get(name, {})}
        done[name] = base_ok or base is None

    for start in profiles:
        path, current = [], start
        while current not in done:  # walk up to a settled profile, a root or a problem
            own = profiles[current]
            if not isinstance(own, dict):
                flat[current], done[current] = own, False
                break
            base = own.get("base")
            if base is None:
                settle(current, False)
                break
            problem = _base_problem(profiles, current, base)
            if problem is None and base in path:
                cycle = path[path.index(base):] + [current]
                first = cycle.index(min(cycle))
                cycle = cycle[first:] + cycle[:first]
                problem = "%s: the bases of %s form a cycle (%s)" % (
                    PROFILES_VAR, ", ".join(cycle), " -> ".join(cycle + [cycle[0]]))
                for name in cycle:
                    settle(name, False)
                    done[name] = False
                path = path[:path.index(base)]
                problems.append(problem)
                break
            if problem is not None:
                problems.append(problem)
                settle(current, False)
                done[current] = False
                break
            path.append(current)
            current = base
        for name in reversed(path):  # each on its settled base
            if name not in done:
                settle(name, done[profiles[name]["base"]])
    if not isinstance(thresholds, dict):
        flat_thresholds = thresholds
    if model_dir is not None:
        flat, placed = drafter.place(flat, model_dir)
        problems.extend(placed)
    return flat, flat_thresholds, problems
