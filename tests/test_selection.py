"""The one rule that picks a winner (sglang_perf/judge/selection.py), for compare and tune alike:
behind no other beyond the intervals; the current profile among those, else the cheapest, then the
first measured; none when each is behind another somewhere."""
from __future__ import annotations

import random

import pytest

from sglang_perf.judge import selection, setting


def by_interval(ivs):
    """ahead(a, b) on one figure: a's lower bound above b's upper bound."""
    return lambda a, b: ivs[a][0] > ivs[b][1]


def test_one_candidate_wins_alone_and_none_is_no_winner():
    assert selection.winner(["a"], lambda a, b: False, len) == "a"
    assert selection.winner([], lambda a, b: False, len) is None


def test_a_tie_goes_to_the_current_profile_else_the_cheapest_then_the_first():
    ivs = {"cheap": (50, 60), "dear": (52, 62), "current": (51, 61), "slow": (10, 20)}
    cost = {"cheap": 1, "dear": 3, "current": 2, "slow": 0}.get
    ahead = by_interval(ivs)
    assert selection.ranked(list(ivs), ahead, cost, current="current") == ["current", "cheap", "dear"]
    assert selection.ranked(list(ivs), ahead, cost) == ["cheap", "current", "dear"]
    # the slow one is behind the others: never a winner, however cheap
    assert selection.winner(list(ivs), ahead, cost, current="slow") == "cheap"
    assert selection.ranked(["x", "y"], by_interval({"x": (1, 2), "y": (1, 2)}), lambda c: 0) == ["x", "y"]


def test_a_trade_off_has_no_winner():
    # a ahead of b in one case, b ahead of a in another
    assert selection.ranked(["a", "b"], lambda p, q: True, lambda c: 0) == []


@pytest.mark.parametrize("n", [1, 6, 1024])
def test_the_winner_is_never_behind_another_and_the_current_wins_when_it_can(n):
    rng = random.Random(n)
    ivs = {}
    for i in range(n):
        mid = rng.uniform(20, 80)
        ivs["s%d" % i] = (mid - rng.uniform(0, 5), mid + rng.uniform(0, 5))
    ahead = by_interval(ivs)
    names = list(ivs)
    w = selection.winner(names, ahead, lambda c: int(c[1:]) % 7)
    assert w is not None and not any(ahead(q, w) for q in names)
    best = max(names, key=lambda c: ivs[c][1])  # the highest upper bound is behind no other
    assert selection.winner(names, ahead, lambda c: 0, current=best) == best


def S(kind, depth, adaptive=False, mem=0.88, engine="sglang"):
    return setting.Setting(engine, kind, depth, adaptive, mem)


def test_the_cost_order_is_no_drafter_fewer_draft_tokens_adaptive_off_then_the_lower_fraction():
    # cheapest first; each neighbour differs from the next in exactly one place of the order
    order = [S("none", 0), S("chain", 1), S("chain", 3), S("chain", 3, True), S("chain", 3, True, 0.92),
             S("block", 4), S("eagle3", 4), S("block", 16, mem=0.80)]
    assert sorted(reversed(order), key=selection.cost) == order
    assert [selection.tie_break(a, b) for a, b in zip(order, order[1:])] == [
        "fewer draft tokens", "fewer draft tokens", "adaptive off", "the lower memory fraction",
        "no drafter", "fewer draft tokens", "fewer draft tokens"]
    # not cheaper: the dearer, or the same cost (another engine, another profile's name)
    assert selection.tie_break(order[1], order[0]) is None
    assert selection.tie_break(S("chain", 3), S("chain", 3, engine="vllm")) is None
    named = setting.Named(*S("chain", 3), "nextn_3step")
    assert selection.cost(named) == selection.cost(S("chain", 3))
    assert selection.cost(list(named)) == selection.cost(named)  # as tune.json keeps it


def test_a_profile_as_a_setting():
    assert setting.of_profile({}, "sglang", 0.88) == S("none", 0)
    p = {"speculative_algorithm": "NEXTN", "speculative_num_steps": 4, "speculative_eagle_topk": 1,
         "speculative_num_draft_tokens": 5, "speculative_adaptive": True, "mem_fraction_static": 0.84}
    assert setting.of_profile(p, "sglang", 0.88) == S("chain", 4, True, 0.84)
    assert setting.of_profile(p, None, 0.88, name="deep") == setting.Named(*S("chain", 4, True, 0.84), "deep")
    block = {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 16,
             "draft_model": {"repo": "z-lab/Qwen3.6-27B-DFlash"}}
    assert setting.of_profile(block, "sglang", 0.9) == S("block", 16, mem=0.9)
    assert setting.of_profile(dict(block, engine="vllm", speculative_num_steps=7), "sglang", 0.9)[:3] == (
        "vllm", "block", 8)
