"""The role's profiles are written out once: every command line the demo, the tests and the
self-check start the emulator with is the role defaults rendered by the deploy's own filter, and
no inventory, scenario or vars file restates a profile."""
from __future__ import annotations

import yaml

from bench import profiles
from conftest import ROOT, role_defaults
from sglang_perf.plan.profile import profile_engine, sglang_argv

DEFAULTS = role_defaults()


def test_bench_profiles_are_the_role_defaults_rendered():
    sglang = {name: profile for name, profile in DEFAULTS["sglang_profiles"].items()
              if profile_engine(profile, DEFAULTS["sglang_engine"]) == "sglang"}
    assert {"nextn_3step", "nextn_1step", "no_spec"} <= set(sglang)
    assert profiles.PROFILE_ARGS == {name: sglang_argv(profile, DEFAULTS["sglang_version"])
                                     for name, profile in sglang.items()}


def test_the_hand_launch_is_not_a_role_profile():
    # the original hand launch keeps the model's own context and SGLang's memory defaults
    assert profiles.HAND_LAUNCH_ARGS not in profiles.PROFILE_ARGS.values()
    assert "--context-length" not in profiles.HAND_LAUNCH_ARGS


def _yaml_files():
    for top in ("inventories", "molecule", "playbooks", "tests", "roles"):
        for path in sorted((ROOT / top).rglob("*.yml")):
            if path != ROOT / "roles/sglang/defaults/main.yml" and "meta" not in path.parts:
                yield path


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item)


def test_no_other_file_restates_the_profiles():
    restating = []
    for path in _yaml_files():
        for doc in yaml.safe_load_all(path.read_text()):
            if "sglang_profiles" in set(_keys(doc)):
                restating.append(str(path.relative_to(ROOT)))
    assert restating == [], "profiles belong in roles/sglang/defaults/main.yml only"
