"""The one rule that picks a winner among measured settings, for the comparison
(bench/compare_answer.py) and the tuner (judge/tune.py): among the settings that passed the gate,
those behind no other beyond the intervals; of them the current profile (a change needs evidence),
else the cheapest (``cost``: no drafter before a drafter, fewer draft tokens, adaptive off, the
lower memory fraction), then the first given."""
from __future__ import annotations

from . import setting

# what each place of cost() prefers, in its order (tie_break's words)
COST_ORDER = ("no drafter", "fewer draft tokens", "adaptive off", "the lower memory fraction")


def cost(key):
    """The tie order of a setting (setting.Setting or Named): the cheaper first - no drafter
    before a drafter, fewer draft tokens, adaptive off, the lower memory fraction."""
    key = setting.as_key(key)
    return (setting.drafter(key), setting.draft_tokens(key), bool(key.adaptive), key.mem)


def tie_break(a, b):
    """Which of COST_ORDER's places puts setting ``a`` before ``b`` (the first that differs), or
    None when ``a`` is not cheaper."""
    for why, x, y in zip(COST_ORDER, cost(a), cost(b)):
        if x != y:
            return why if x < y else None
    return None


def ranked(candidates, ahead, cost, current=None):
    """``candidates`` (each passed the gate; in the order they were measured) behind no other,
    best first: the current profile first when it is one of them, then by ``cost(c)`` (ascending),
    then in the given order. ``ahead(a, b)``: a is ahead of b beyond both intervals in some judged
    case. [] when each is behind another somewhere (a trade-off: no winner). Quadratic in the
    candidates: a comparison or a tuning measures tens."""
    candidates = list(candidates)
    front = [c for c in candidates if not any(ahead(q, c) for q in candidates if q != c)]
    return sorted(front, key=lambda c: (c != current, cost(c), candidates.index(c)))


def winner(candidates, ahead, cost, current=None):
    """The first of ranked(), or None."""
    order = ranked(candidates, ahead, cost, current)
    return order[0] if order else None
