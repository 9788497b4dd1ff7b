# -*- coding: utf-8 -*-
"""A setting, as the tuner searches it and the comparison ranks it: one engine, one kind of
speculation (none; a chain of the model's MTP head at ``depth`` steps, adaptive or not; a
drafter's block of ``depth`` tokens; another drafter's chain), one mem_fraction_static; a host
profile read as one (``of_profile``); its names and what it drafts (``draft_tokens``: the
selection's cost order reads it). Standard library only."""
from __future__ import annotations

from typing import NamedTuple

from .. import engines
from ..plan import profile


class Setting(NamedTuple):
    """One setting of the space: an engine, a kind of speculation (none, chain, block, or another
    algorithm's own), its depth (chain steps, block tokens; 0 without), adaptive steps, and the
    mem_fraction_static. Equal to the plain tuple of its fields (tune.json stores it as a list)."""
    engine: str
    kind: str
    depth: int
    adaptive: bool
    mem: float


class Named(NamedTuple):
    """One of the host's own profiles as a setting (a tune over an explicit list of profiles,
    ``bench tune --profiles``): its fields as a Setting's, read off the profile, and its name -
    the profile is launched as it stands, whatever else it sets (two profiles of the same
    speculation and fraction are two settings)."""
    engine: str
    kind: str
    depth: int
    adaptive: bool
    mem: float
    profile: str


def as_key(key):
    """A key as the tuner holds it: a Named with a profile's name (six fields), else a Setting."""
    return Named(*key) if len(key) == 6 else Setting(*key)


class Spec(NamedTuple):
    """A setting without its fraction: what speed follows."""
    engine: str
    kind: str
    depth: int
    adaptive: bool


def key_name(key):
    """A setting's profile name: tune_<engine>_<kind><depth>[_adaptive]_m<fraction x 100>; a
    Named's, the profile's own."""
    key = as_key(key)
    if isinstance(key, Named):
        return key.profile
    shape = "%s%d" if key.kind in ("chain", "block") else "%s_%d"  # eagle3_3, not eagle33
    what = "no_spec" if key.kind == "none" else shape % (key.kind, key.depth)
    return "tune_%s_%s%s_m%s" % (key.engine, what, "_adaptive" if key.adaptive else "",
                                 ("%g" % (key.mem * 100)).replace(".", "p"))


def key_label(key):
    """How a report names a setting: 'SGLang NEXTN 4 steps adaptive, mem 0.86'; a Named's with
    the profile's name first: 'nextn_3step (SGLang NEXTN 3 steps, mem 0.88)'."""
    key = as_key(key)
    if isinstance(key, Named):
        return "%s (%s)" % (key.profile, key_label(key[:5]))
    eng = engines.get(key.engine)
    steps = "%d step%s%s" % (key.depth, "" if key.depth == 1 else "s", " adaptive" if key.adaptive else "")
    what = "no speculation" if key.kind == "none" else \
        "%s block %d" % (eng.tune_algorithms["block"], key.depth) if key.kind == "block" else \
        "%s %s" % (eng.tune_algorithms["chain"] if key.kind == "chain" else key.kind.upper(), steps)
    return "%s %s, mem %.2f" % (eng.label, what, key.mem)


def draft_tokens(key):
    """Tokens one verify can yield as it starts: the block, 1 without speculation, else steps + 1
    (a chain of the model's head or a drafter's)."""
    key = as_key(key)
    return 1 if key.kind == "none" else key.depth if key.kind == "block" else key.depth + 1


def drafter(key):
    """True when the setting loads a drafter of its own (a block, or another algorithm's chain,
    EAGLE3); False without speculation or on the model's own head."""
    return as_key(key).kind not in ("none", "chain")


def spec_of(key):
    """The setting without its fraction: what speed follows."""
    return Spec(*as_key(key)[:4])



def profile_kind(p, engine=None):
    """A flat profile's kind of speculation, from its algorithm: none; a block (the engine's block
    algorithm, DFLASH); a chain (the model's own head: no drafter); else the algorithm's own name,
    lower case (a drafter's chain, EAGLE3: a kind of its own, never one of the space's)."""
    algo = profile.normalised("speculative_algorithm", p.get("speculative_algorithm"))
    if not algo:
        return "none"
    eng = engines.get(profile.profile_engine(p, engine))
    if algo == eng.tune_algorithms["block"].upper():
        return "block"
    return str(algo).lower() if p.get("draft_model") else "chain"


def of_profile(p, engine=None, default_mem=None, name=None):
    """The flat profile ``p`` (bases resolved) as a Setting; a Named when ``name`` is given (the
    profile launched as it stands: ``bench tune --profiles``, a comparison's row). ``engine``: the
    host's sglang_engine (a profile's own wins); ``default_mem``: the fraction the memory
    preflight assumes when the profile leaves it to the engine. A block's depth is its accept
    ceiling (the tokens one verify can yield); a chain's its steps."""
    engine = profile.profile_engine(p, engine)
    mem = float(p.get("mem_fraction_static") or default_mem or 0)
    kind = profile_kind(p, engine)
    if kind == "none":
        key = Setting(engine, kind, 0, False, mem)
    elif kind == "block":
        key = Setting(engine, kind, profile.accept_ceiling(p, engine), False, mem)
    else:
        key = Setting(engine, kind, int(p.get("speculative_num_steps") or 1),
                      p.get("speculative_adaptive") is True, mem)
    return key if name is None else Named(*key, name)
