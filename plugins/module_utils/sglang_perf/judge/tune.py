# -*- coding: utf-8 -*-
"""The tuner's decisions (docs/tune.md): the space of settings around a host's profile, what one
launch's figures predict for the settings not launched, which launch comes next within the
budget, and the answer. No I/O: bench/tune.py launches, measures and writes; this decides
(what a failed launch was, and the outage: tune_launch.py). Standard library only.

A setting (judge/setting.py) is one engine, one kind of speculation and one
mem_fraction_static. The host's context length and max running requests are kept: they are
promises to its users.

Economy, in the order the search spends launches:

1. the host's current profile (the figure to beat, and a point of the step-time model);
2. the deepest chain of each engine (its acceptance at every position: the accept length of
   every shallower chain is the sum of its first positions, read, not launched) and the largest
   block of the host's drafter (the same for smaller blocks);
3. the settings whose prediction - accept length over a step time fitted on the launches'
   measured step times, a + b x draft tokens per kind - reaches the leader's lower bound, best
   first, the model refitted after each; a launch is measured on the objective case first and
   stopped there when its upper bound is under the leader's lower bound;
4. the memory fraction last: speed does not follow it, capacity does. For the leaders, the
   lowest fraction whose capacity - the launch's reported figures moved by the memory model's
   change between the two fractions - holds the promise and the plan's needs; a setting that
   failed capacity moves up, one that did not start (out of memory) moves down.

A tune over an explicit list of the host's profiles (Named keys: ``bench tune --profiles``) spends
no launch on the economy above: each profile once, as it stands, in the order given.

Every setting in the answer was measured (finalists are launched, never only predicted); the
answer is the fastest that passed the whole plan, ties (overlapping intervals) to the cheaper
(selection.cost, the comparison's order too). When nothing
beats the current profile beyond the intervals, the current profile is the answer."""
from __future__ import annotations

from .. import engines
from ..plan import inherit, profile
from . import selection
from .setting import Named, Setting, as_key, draft_tokens, key_label, profile_kind, spec_of
from .tune_launch import FAILURES, NOT_RETRIED

# The default space (issue 34): chains of 1-6 steps with and without adaptive, drafter blocks
# 4/8/16, fractions 0.80-0.92 by 0.02.
DEFAULT_SPACE = {"engines": ["sglang"], "no_spec": True, "chain_steps": [1, 2, 3, 4, 5, 6],
                 "adaptive": [False, True], "blocks": [4, 8, 16],
                 "mem_fractions": [0.80, 0.82, 0.84, 0.86, 0.88, 0.90, 0.92]}
SPACE_KEYS = {"engines": list, "no_spec": bool, "chain_steps": list, "adaptive": list, "blocks": list,
              "mem_fractions": list}
# Every speculative setting a profile may carry: a setting of the tuner states its own and no other.
SPEC_KEYS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
             "speculative_num_draft_tokens", "speculative_adaptive", "speculative_adaptive_config",
             "draft_model")
PROMISES = ("context_length", "max_running_requests")
# Launches of a setting at other fractions before it is given up (capacity up / start-up down).
MEMORY_TRIES = 3


class SpaceError(ValueError):
    """A --space file that cannot be read as a space; the message names the key."""


def space_of(data, engines_given=None):
    """DEFAULT_SPACE with the keys of ``data`` (a --space file's mapping) over it; SpaceError
    naming what is wrong. ``engines_given``: --engines, over the file's."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise SpaceError("the space must be a mapping of %s, got %r" % (", ".join(SPACE_KEYS), data))
    unknown = sorted(set(data) - set(SPACE_KEYS))
    if unknown:
        raise SpaceError("unknown key(s) %s (known: %s)"
                         % (", ".join(map(str, unknown)), ", ".join(SPACE_KEYS)))
    space = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULT_SPACE.items()}
    for key, value in data.items():
        if not isinstance(value, SPACE_KEYS[key]):
            raise SpaceError("%s must be a %s, got %r" % (key, SPACE_KEYS[key].__name__, value))
        space[key] = value
    if engines_given:
        space["engines"] = list(engines_given)
    for e in space["engines"]:
        if engines.find(e) is None:
            raise SpaceError("engines: %r is not an engine (known: %s)" % (e, ", ".join(engines.names())))
    for key in ("chain_steps", "blocks"):
        bad = [x for x in space[key] if isinstance(x, bool) or not isinstance(x, int) or x < 1]
        if bad:
            raise SpaceError("%s must be whole numbers of at least 1, got %s" % (key, bad))
    if [b for b in space["blocks"] if b < 2]:
        raise SpaceError("blocks must be at least 2 tokens (one drafted), got %s" % space["blocks"])
    if any(not isinstance(a, bool) for a in space["adaptive"]):
        raise SpaceError("adaptive must list true and/or false, got %s" % space["adaptive"])
    bad = [f for f in space["mem_fractions"] if isinstance(f, bool) or not isinstance(f, (int, float))
           or not 0 < f < 1]
    if bad or not space["mem_fractions"]:
        raise SpaceError("mem_fractions must be fractions between 0 and 1, got %s" % space["mem_fractions"])
    space["mem_fractions"] = sorted({round(float(f), 4) for f in space["mem_fractions"]})
    return space


def candidates(space, drafter_engines):
    """Every setting of ``space``: (engine, kind, depth, adaptive, mem). ``drafter_engines``: the
    engines the host has a drafter profile on (blocks only there)."""
    out = []
    for engine in space["engines"]:
        eng = engines.get(engine)
        specs = [("none", 0, False)] if space["no_spec"] else []
        for steps in space["chain_steps"]:
            for adaptive in space["adaptive"]:
                if adaptive and not eng.tune_adaptive:
                    continue
                specs.append(("chain", steps, adaptive))
        if engine in drafter_engines:
            specs += [("block", b, False) for b in space["blocks"]]
        out += [Setting(engine, kind, depth, adaptive, mem) for kind, depth, adaptive in specs
                for mem in space["mem_fractions"]]
    return out


def template_of(profiles, engine, kind, current, default_engine=engines.DEFAULT):
    """The host profile a setting is written over (tuned.yml names it as the base): the current
    profile for its own engine and kind, else the first profile of that engine and kind (a block
    needs the host's drafter profile of the engine's block algorithm), else for no speculation or
    a chain the engine's first profile. A profile's engine is its own, else ``default_engine`` (the
    host's sglang_engine), as the deploy reads it. None when the host has none (a block without a
    drafter profile)."""
    named = [current] + sorted(n for n in profiles if n != current)
    for want_kind in ((kind,) if kind == "block" else (kind, None)):
        for name in named:
            p = profiles.get(name)
            if not isinstance(p, dict) or profile.profile_engine(p, default_engine) != engine:
                continue
            if want_kind is not None and profile_kind(p, default_engine) != want_kind:
                continue
            return name
    return None


def settings_of(key, profiles, current, default_engine=engines.DEFAULT):
    """(base profile name, what the setting states over it) for ``key`` on the host whose flat
    profiles are ``profiles`` and whose engine is ``default_engine`` (template_of); None when it has
    no profile to write it over."""
    engine, kind, depth, adaptive, mem = key[:5]
    base = template_of(profiles, engine, kind, current, default_engine)
    if base is None:
        return None
    eng = engines.get(engine)
    base_p = profiles[base]
    # the base's speculation goes (a block keeps the base's drafter), the setting's comes
    over = {k: None for k in set(SPEC_KEYS) | {k for k in base_p if k.startswith("speculative_")}
            if kind != "block" or not (k == "draft_model" or k.startswith("speculative_draft_"))}
    over.update({k: v for k, v in eng.tune_settings(kind, depth, adaptive).items()})
    over["mem_fraction_static"] = mem
    cur = profiles.get(current) or {}
    for k in PROMISES:  # the host's promises, as its current profile makes them
        over[k] = cur.get(k)
    # only what differs from the base (a null removes the base's)
    diff = {k: v for k, v in over.items() if base_p.get(k) != v and not (v is None and k not in base_p)}
    return base, diff


def flat(base, base_profile, diff):
    """The flat profile of a setting written as ``diff`` over the flat profile ``base``
    (inherit.resolve: a null removes the base's)."""
    return inherit.resolve({base: base_profile, "_setting": dict(diff, base=base)})[0]["_setting"]


# ---------------------------------------------------------------------------- the bars ------
# A threshold that is a figure of one configuration, not a promise to the service's users: the
# accept length follows the speculation (none: 1.0; a 6-step chain's at another depth than a
# 3-step's). Candidates are not held to the current profile's.
CONFIGURATION_FIGURES = ("min_accept_len",)


def service_bars(thresholds):
    """{case: thresholds} every candidate is held to: the current profile's (flat, per case)
    less its CONFIGURATION_FIGURES - speed, TTFT, aggregate, the quality checks; capacity is
    judged against the promise beside them."""
    return {case: {k: v for k, v in (limits or {}).items() if k not in CONFIGURATION_FIGURES}
            for case, limits in (thresholds or {}).items()}


def winner_bars(service, proposed):
    """{case: thresholds} the winner is deployed with: per threshold the stricter of the service
    bar and the winner's own figure less the margin (``proposed``: calibration.propose's, per case), so
    the deploy judges it at least as the tuner did; a case or threshold only one side has, that
    side's."""
    out = {}
    for case in list(service) + [c for c in proposed if c not in service]:
        bars = dict(service.get(case) or {})
        for key, value in (proposed.get(case) or {}).items():
            if value is None:
                continue
            if key not in bars or bars[key] is None:
                bars[key] = value
            else:
                bars[key] = min(bars[key], value) if key.startswith("max_") else max(bars[key], value)
        out[case] = bars
    return out


# ----------------------------------------------------------------------- measurements ------
def interval(outcome):
    """(estimate, lower, upper) of a launch's objective decode tok/s; None when not measured."""
    iv = (outcome or {}).get("tok_s") or {}
    if iv.get("estimate") is None:
        return None
    est = float(iv["estimate"])
    return est, float(est if iv.get("lower") is None else iv["lower"]), \
        float(est if iv.get("upper") is None else iv["upper"])


def step_time(outcome):
    """Seconds a verify takes at C=1: accept length / decode tok/s (1 / tok/s without drafts)."""
    iv = interval(outcome)
    if iv is None or iv[0] <= 0:
        return None
    return float(outcome.get("accept_len") or 1.0) / iv[0]


def fit_line(points):
    """Least squares (a, b) of t = a + b x over ``points`` [(x, t)]; with one x: (t, 0)."""
    xs = {x for x, _ in points}
    n = len(points)
    if n == 0:
        return None
    mx = sum(x for x, _ in points) / float(n)
    mt = sum(t for _, t in points) / float(n)
    if len(xs) < 2:
        return mt, 0.0
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (t - mt) for x, t in points) / sxx
    return mt - b * mx, b


def accept_from_positions(by_position, positions):
    """The accept length of a draft of ``positions`` positions, from a deeper one's acceptance
    per position (the share of verifies that accepted position k: the first ``positions`` of a
    chain or a block are the same drafts). None when the deeper draft is not deep enough."""
    if by_position is None or positions > len(by_position):
        return None
    return 1.0 + sum(float(p) for p in by_position[:positions])


def _ran(outcome):
    """Whether a launch ran its measurement through: it started and did not run out of memory
    during a case (the 32K case's activations: a lower fraction leaves them room)."""
    return outcome.get("started", True) and outcome.get("memory") != "over"


def combined(outcomes):
    """One setting's launches as one outcome: the last's fields, the objective's estimate their
    mean, its interval from the lowest lower bound to the highest upper (a second launch widens
    what one launch's request-to-request spread says by the launch-to-launch one), the accept
    length their mean; ``launches`` how many."""
    if len(outcomes) == 1:
        return outcomes[0]
    ivs = [interval(o) for o in outcomes]
    out = dict(outcomes[-1], launches=len(outcomes))
    if all(iv is not None for iv in ivs):
        out["tok_s"] = {"estimate": sum(iv[0] for iv in ivs) / len(ivs), "lower": min(iv[1] for iv in ivs),
                        "upper": max(iv[2] for iv in ivs)}
    als = [o.get("accept_len") for o in outcomes if o.get("accept_len") is not None]
    if als:
        out["accept_len"] = sum(als) / len(als)
    return out


class Tuner(object):
    """The search over ``keys`` (candidates()) around the current setting ``current_key``.

    ``refused``: {key: reason} the preflight gave (never launched). ``capacity_model(key, mem)``:
    the memory model's (kv tokens, running requests) of a setting, or None; ``needs``: (context
    tokens, running requests) the promise and the plan need. Record each launch with record();
    next() names the next setting to launch (None: done); answer() says what won and why every
    other setting lost. Keys that are all Named (the host's own profiles, listed) are launched
    each once in the order given, the current first: nothing predicted, no fraction searched (a
    profile is launched as it stands); the answer as for a space."""

    def __init__(self, keys, current_key, refused=None, capacity_model=None, needs=(None, None),
                 budget=12):
        self.keys = [as_key(k) for k in keys]
        self.current = as_key(current_key)
        self.listed = bool(self.keys) and all(isinstance(k, Named) for k in self.keys)
        self.refused = dict(refused or {})
        self.capacity_model = capacity_model
        self.needs = needs
        self.budget = int(budget)
        self.launches = []  # [(key, outcome)]
        self.notes = []  # why the search stopped early
        self.observations = []  # what the report says beside the answer (a drafter's trained block)

    # -- what is known ---------------------------------------------------------------------
    def outcome(self, key):
        for k, o in reversed(self.launches):
            if k == key:
                return o
        return None

    def passed(self):
        """{key: outcome} of the settings that passed with an objective figure - every launch of
        them (a finalist launched again must pass again; one cut by the budget does not count),
        their figures combined (combined())."""
        runs = {}
        for k, o in self.launches:
            if not o.get("cut"):
                runs.setdefault(k, []).append(o)
        return {k: combined(os) for k, os in runs.items()
                if all(interval(o) is not None and o.get("passed") for o in os)}

    def finalists(self):
        """The settings launched again at the end, in this order: the winner, the runner-up,
        then the current profile (its figure again, hours after its first); each once."""
        answer = self.answer()
        out = []
        for k in (answer["winner"], answer["runner_up"], self.current):
            if k is not None and k not in out and k not in self.refused:
                out.append(k)
        if self.current in out and out[-1] != self.current:
            out.remove(self.current)
            out.append(self.current)
        return out if answer["winner"] is not None else []

    def leader(self):
        """The passing launch with the highest estimate, or None."""
        ok = self.passed()
        if not ok:
            return None
        return max(ok, key=lambda k: interval(ok[k])[0])

    def record(self, key, outcome):
        self.launches.append((as_key(key), dict(outcome)))

    def left(self):
        return self.budget - len(self.launches)

    # -- the model -------------------------------------------------------------------------
    def _launched_specs(self):
        return {spec_of(k) for k, _ in self.launches}

    def _speed_by_spec(self):
        """{spec: outcome} the best-measured launch of each spec (speed does not follow the fraction)."""
        out = {}
        for k, o in self.launches:
            if interval(o) is not None:
                out[spec_of(k)] = o
        return out

    def predict(self, spec):
        """Predicted (tok/s, accept length) of a spec from the launches, or None: the deepest
        launch of its chain gives the accept length (a chain's first positions are a shallower
        chain's drafts), a line through the chain's step times the time. A block is never
        predicted from another block: DFlash drafts a block at once with non-causal attention
        (SGLang models/dflash.py, vLLM qwen3_dflash.py), so a shorter block drafts other tokens."""
        engine, kind, depth, adaptive, _ = spec + (None,)
        speeds = self._speed_by_spec()
        if spec in speeds:
            o = speeds[spec]
            return interval(o)[0], o.get("accept_len") or 1.0
        if kind != "chain" and kind != "none":
            return None
        same = [(s, o) for s, o in speeds.items() if s.engine == engine and s.kind == kind]
        if kind == "none":
            chains = [(draft_tokens(s + (0,)), step_time(o)) for s, o in speeds.items()
                      if s.engine == engine and s.kind == "chain" and not s.adaptive and step_time(o)]
            line = fit_line(chains) if len({x for x, _ in chains}) >= 2 else None
            if line is None:
                return None
            t0 = line[0] + line[1] * 1  # one token a step, the chain's line at no draft
            return (1.0 / t0, 1.0) if t0 > 0 else None
        deep = [o for s, o in same if o.get("by_position") and len(o["by_position"]) >= depth]
        if not deep:
            return None
        al = accept_from_positions(max(deep, key=lambda o: len(o["by_position"]))["by_position"], depth)
        pts = [(draft_tokens(s + (0,)), step_time(o)) for s, o in same if not s.adaptive and step_time(o)]
        if not pts:
            return None
        a, b = fit_line(pts)
        if len({x for x, _ in pts}) < 2:
            b = 0.0  # one depth known: the same step time (optimistic for a shorter draft)
        t = a + b * (depth + 1)
        if adaptive:  # adaptive at C=1 settles on one of its candidate steps: at best the best fixed
            return None
        return (al / t, al) if t > 0 else None

    # -- the next launch -------------------------------------------------------------------
    def _at_fraction(self, spec, prefer):
        """The setting of ``spec`` to launch: at the fraction its kind last started at on its
        engine (else ``prefer``) when the preflight accepts it, else the nearest accepted fraction
        (the higher first), never at or above one where its kind ran out of memory; None when
        every fraction is excluded."""
        kind = [(k, o) for k, o in self.launches if k[:2] == spec[:2]]
        started = [k.mem for k, o in kind if o.get("started", True)]
        no_room = [k.mem for k, o in kind if o.get("memory") == "over"]
        prefer = started[-1] if started else prefer
        options = [k for k in self.keys if spec_of(k) == spec and k not in self.refused
                   and (not no_room or k.mem < min(no_room))]
        if not options:
            return None
        return min(options, key=lambda k: (abs(k.mem - prefer), -k.mem))

    def _fresh(self, key):
        return key is not None and self.outcome(key) is None

    def next(self):
        """The next setting to launch, or None when the search is done (or the budget spent)."""
        if self.left() <= 0:
            return None
        if self.outcome(self.current) is None and self.current not in self.refused:
            return self.current
        if self.listed:
            return next((k for k in self.keys if k not in self.refused and self.outcome(k) is None), None)
        prefer = self.current.mem
        engines_first = sorted({k.engine for k in self.keys}, key=lambda e: (e != self.current.engine, e))
        for engine in engines_first:
            for kind in ("chain", "block"):
                probe = self._probe(engine, kind, prefer)
                if probe is not None:
                    return probe
        return self._next_contender(prefer) or self._next_unpredicted(prefer) or self._next_memory() \
            or self._next_spare(prefer)

    def _probe(self, engine, kind, prefer):
        """The deepest setting of a kind (its acceptance per position), then, for a chain, its
        middle depth for the step-time line (a smaller block is not predicted: _next_unpredicted)."""
        specs = sorted({spec_of(k) for k in self.keys
                        if (k.engine, k.kind, k.adaptive) == (engine, kind, False)
                        and self._at_fraction(spec_of(k), prefer) is not None}, key=lambda s: s.depth)
        if not specs:
            return None
        launched = sorted({s.depth for s in self._launched_specs()
                           if s.engine == engine and s.kind == kind and not s.adaptive})
        if specs[-1].depth not in launched:
            return self._at_fraction(specs[-1], prefer)
        if not any(_ran(o) for k, o in self.launches if spec_of(k) == specs[-1]):
            return self._retry(specs[-1])  # no room at its fraction (at start or in a case): another
        if len(launched) >= 2 or kind != "chain":
            return None
        shallower = [s for s in specs if s.depth < specs[-1].depth]
        return self._at_fraction(shallower[len(shallower) // 2], prefer) if shallower else None

    def ceiling_speed(self, spec):
        """The most ``spec`` could decode: every draft accepted (draft_tokens a verify) at the
        shortest step it could take - a measured block's step less the chain line's cost per
        verified token for each token it verifies fewer (the drafter's pass is one whatever the
        block), never under the fastest verify measured on its engine; None before a step time
        is known."""
        fastest = self._fastest_step(spec.engine)
        if not fastest:
            return None
        tokens = draft_tokens(spec + (0,))
        floor = fastest
        slope = self._chain_slope(spec.engine)
        if slope is not None:
            for s, o in self._speed_by_spec().items():
                if s.engine == spec.engine and s.kind == spec.kind and step_time(o) and s.depth >= tokens:
                    floor = max(floor, step_time(o) - slope * (s.depth - tokens))
        return tokens / floor

    def _chain_slope(self, engine):
        """Seconds a verify takes per draft token on the chain's line; None without two depths."""
        pts = [(draft_tokens(s + (0,)), step_time(o)) for s, o in self._speed_by_spec().items()
               if s.engine == engine and s.kind == "chain" and not s.adaptive and step_time(o)]
        if len({x for x, _ in pts}) < 2:
            return None
        return max(0.0, fit_line(pts)[1])

    def _next_unpredicted(self, prefer):
        """A block not launched (never predicted) that could still beat the leader's lower bound
        at its ceiling speed, the highest ceiling first."""
        bar, launched = self.bar(), self._launched_specs()
        best = None
        for spec in sorted({spec_of(k) for k in self.keys if k.kind == "block"} - launched):
            top = self.ceiling_speed(spec)
            key = self._at_fraction(spec, prefer)
            if key is not None and (top is None or top >= bar) and \
                    (best is None or (top or float("inf")) > best[0]):
                best = (top or float("inf"), key)
        return best[1] if best else None

    def _retry(self, spec):
        """After ``spec`` failed to start: out of memory, the lowest accepted fraction under the
        lowest that failed that the memory model says holds what is needed (else one step down);
        pools too small, the lowest above the highest that failed. A failure whose log names
        neither is taken for the commoner, out of memory, once. None after MEMORY_TRIES launches."""
        tried = [(k, o) for k, o in self.launches if spec_of(k) == spec]
        unknown_failures = [o for _, o in tried if o.get("memory") is None]
        if len(tried) >= MEMORY_TRIES or any(_ran(o) for _, o in tried) or len(unknown_failures) > 1 \
                or any(o.get("failure") in NOT_RETRIED for _, o in tried):
            return None
        ceiling = min([k.mem for k, o in tried if o.get("memory") in ("over", None)] or [2.0])
        floor = max([k.mem for k, o in tried if o.get("memory") == "under"] or [-1.0])
        options = sorted((k for k in self.keys if spec_of(k) == spec and k not in self.refused
                          and floor < k.mem < ceiling), key=lambda k: k.mem)
        held = [k for k in options if self._holds_model(k)]
        if held:  # the lowest the memory model says holds what is needed: the cheapest
            return held[0]
        unknown = [k for k in options if self._holds_model(k) is None]
        if not unknown:
            return None
        return unknown[-1] if ceiling < 2.0 else unknown[0]  # no model: one step away

    def _meets(self, kv, running):
        """Whether a capacity (KV tokens, running requests; None: not known) holds the needs."""
        need_ctx, need_run = self.needs
        short_context = need_ctx and kv < need_ctx
        return not short_context and not (need_run and running is not None and running < need_run)

    def _holds_model(self, key):
        """The memory model's own word on ``key`` (no launch of it reported a capacity)."""
        m = self.capacity_model(key, key.mem) if self.capacity_model else None
        return None if m is None else self._meets(*m)

    def _fastest_step(self, engine):
        """The chain line's intercept (a verify of the target alone), else the shortest step time
        measured on the engine: no draft can verify faster."""
        speeds = self._speed_by_spec()
        pts = [(draft_tokens(s + (0,)), step_time(o)) for s, o in speeds.items()
               if s.engine == engine and s.kind == "chain" and not s.adaptive and step_time(o)]
        if len({x for x, _ in pts}) >= 2:
            a, b = fit_line(pts)
            if a + b > 0:
                return a + b
        times = [step_time(o) for s, o in speeds.items() if s.engine == engine and step_time(o)]
        return min(times) if times else None

    def bar(self):
        """The lower bound a setting must reach to matter: the leader's (0 without one)."""
        lead = self.leader()
        return interval(self.passed()[lead])[1] if lead else 0.0

    def _next_contender(self, prefer):
        """The unlaunched spec predicted fastest among those predicted above the leader's lower bound."""
        bar = self.bar()
        launched = self._launched_specs()
        best = None
        for spec in sorted({spec_of(k) for k in self.keys} - launched):
            pred = self.predict(spec)
            if pred is None or pred[0] < bar:
                continue
            key = self._at_fraction(spec, prefer)
            if key is not None and (best is None or pred[0] > best[0]):
                best = (pred[0], key)
        return best[1] if best else None

    def _next_memory(self):
        """For the fastest specs measured (those tied with the leader, or faster but failing only
        on capacity or start-up): the lowest fraction predicted to hold what is needed, launched
        to be measured; a failed start moves down, failed capacity up."""
        ranked = self._speed_ranked()
        if not ranked:
            return None
        top = interval(ranked[0][1])
        for spec_key, o in ranked:
            iv = interval(o)
            if top and iv and iv[2] < top[1]:
                break
            key = self._memory_step(spec_key)
            if key is not None:
                return key
        return None

    def _speed_ranked(self):
        """Launches that passed or fell short of capacity (a higher fraction may pass), fastest
        first; a setting that did not start ranks by its prediction."""
        rows = []
        for k, o in self.launches:
            if interval(o) is not None and (o.get("passed") or o.get("failed_capacity")):
                rows.append((interval(o)[0], k, o))
            elif not o.get("started", True):
                pred = self.predict(spec_of(k))
                if pred:
                    rows.append((pred[0], k, dict(o, tok_s={"estimate": pred[0], "lower": pred[0],
                                                          "upper": pred[0]})))
        rows.sort(key=lambda r: -r[0])
        return [(k, o) for _, k, o in rows]

    def _memory_step(self, key):
        """The next fraction to launch ``key``'s spec at, or None when nothing is left to learn."""
        spec = spec_of(key)
        fractions = sorted(k.mem for k in self.keys if spec_of(k) == spec and k not in self.refused)
        tried = [(k, o) for k, o in self.launches if spec_of(k) == spec]
        if len(tried) >= MEMORY_TRIES:
            return None
        ok = [k.mem for k, o in tried if o.get("passed")]
        no_start = [k.mem for k, o in tried if not _ran(o) and o.get("memory") != "under"]
        short = [k.mem for k, o in tried if o.get("failed_capacity") or o.get("memory") == "under"]
        ceiling = min(no_start) if no_start else None
        floor = max(short) if short else None
        cand = [f for f in fractions if (ceiling is None or f < ceiling) and (floor is None or f > floor)]
        if ok:
            cand = [f for f in cand if f < min(ok)]
        if not cand:
            return None
        holds = [f for f in cand if self._holds(f, tried) is not False]
        pick = min(holds) if holds else None
        if pick is None:
            return None
        target = (spec + (pick,))
        return target if self._fresh(target) else None

    def _holds(self, mem, tried):
        """Whether a spec launched as ``tried`` is predicted to hold the needs at ``mem``: its last
        reported capacity moved by the memory model's change; None when it cannot be told."""
        reported = [(k, o["capacity"]) for k, o in tried if o.get("capacity")]
        if not reported or self.capacity_model is None:
            return None
        k0, cap = reported[-1]
        m0, m1 = self.capacity_model(k0, k0.mem), self.capacity_model(k0, mem)
        if m0 is None or m1 is None:
            return None
        kv = (cap.get("effective_context") or 0) + (m1[0] - m0[0])
        run = cap.get("max_running_requests")
        if run is not None and m0[1] is not None and m1[1] is not None:
            run = run + (m1[1] - m0[1])
        return self._meets(kv, run)

    def _next_spare(self, prefer):
        """Budget left and nothing predicted to win: the adaptive twin of the leading chain
        (its speed cannot be predicted), else nothing."""
        lead = self.leader()
        if lead is None or lead.kind != "chain" or lead.adaptive:
            return None
        twin = Setting(lead.engine, "chain", lead.depth, True, lead.mem)
        if twin in self.keys and twin not in self.refused and self._fresh(twin):
            return twin
        return None

    # -- the answer ------------------------------------------------------------------------
    def answer(self):
        """{winner, runner_up, beats_current, current, ties, reasons {key: why it lost}}."""
        ok = self.passed()
        out = {"winner": None, "runner_up": None, "current": self.current, "beats_current": False,
               "ties": [], "reasons": {}}
        # the one rule (selection.py): behind no other on the objective beyond the intervals; the
        # current profile among those, else the cheapest
        order = selection.ranked(list(ok), lambda a, b: interval(ok[a])[1] > interval(ok[b])[2],
                                 selection.cost, self.current)
        if order:
            winner = order[0]
            out["winner"] = winner
            out["ties"] = order[1:]
            out["beats_current"] = winner != self.current
            rest = sorted((k for k in ok if k != winner), key=lambda k: -interval(ok[k])[0])
            out["runner_up"] = rest[0] if rest else None
        for k in self.keys:
            if k == out["winner"]:
                continue
            out["reasons"][k] = self._why(k, out["winner"], ok, out["ties"])
        return out

    def _why(self, key, winner, ok, ties=()):
        if key in self.refused:
            return "refused: %s" % self.refused[key]
        o = self.outcome(key)
        if o is not None and o.get("cut"):
            return o.get("error") or "cut by the budget"
        if o is None and self.listed:
            return "not launched: the budget (%d launches) ran out before it" % self.budget
        if o is None:
            pred = self.predict(spec_of(key))
            tried = [(k, x) for k, x in self.launches if spec_of(k) == spec_of(key)]
            if tried:
                if self._holds(key.mem, tried) is False:
                    return "not launched: the memory model, moved to what the launch at mem %.2f reported, " \
                           "says it cannot hold the context (%s tokens) and %s running requests there" % (
                               tried[-1][0].mem, self.needs[0], self.needs[1])
                ok = [k.mem for k, x in tried if x.get("passed")]
                if ok and key.mem > min(ok):
                    return "not launched: a higher fraction than mem %.2f, which passed (speed does not " \
                           "follow the fraction; the lower is the cheaper)" % min(ok)
                return "not launched: its speculation was measured at mem %.2f (speed does not follow the " \
                       "fraction)" % tried[-1][0].mem
            if pred is not None:
                return "not launched: predicted %.1f tok/s (accept length %.2f), below the leader's " \
                       "lower bound" % pred if pred[0] < self.bar() else \
                       "not launched: predicted %.1f tok/s (accept length %.2f); the budget ran out" % pred
            if key.kind == "block":
                top = self.ceiling_speed(spec_of(key))
                if top is not None and top < self.bar():
                    return "not launched: even with every draft accepted (%d tokens a verify at the " \
                           "fastest verify measured) it decodes at most %.1f tok/s, under the leader's " \
                           "lower bound" % (draft_tokens(key), top)
                return "not launched, unknown: a block's acceptance is not predicted from another " \
                       "block's (DFlash drafts a block at once, non-causally); the budget went to " \
                       "settings predicted faster"
            if key.adaptive:
                return "not launched: adaptive steps cannot be predicted; the budget went to settings " \
                       "predicted faster"
            return "not launched: the budget went to settings predicted faster"
        if not o.get("started", True):
            kind = o.get("failure", o.get("memory"))
            return "did not start (%s): %s" % (FAILURES.get(kind, FAILURES[None]).split(":")[0],
                                               o.get("error") or "no reason given")
        if o.get("memory") == "over":
            return "ran out of memory during a case: %s" % (o.get("error") or o.get("failure") or "")
        if o.get("stopped") == "slower":
            return "slower: stopped after the objective case (its upper bound under the leader's lower bound)"
        if not o.get("passed"):
            return "failed: %s" % (o.get("failure") or ", ".join(o.get("failed_cases") or ()) or "the gate")
        if key in ties:  # behind no other, as the winner
            return "a tie: the current profile is kept (nothing beats it beyond the intervals)" \
                if winner == self.current else "a tie given to the cheaper %s" % key_label(winner)
        if winner is not None and winner in ok:
            return "slower: %.1f [%.1f, %.1f] tok/s" % interval(o) \
                + " against the winner's %.1f [%.1f, %.1f]" % interval(ok[winner])
        return "slower"
