"""SGLang command lines for the emulator in the demo, the tests and the self-check.

``PROFILE_ARGS`` holds the role's SGLang profiles (``sglang_profiles`` in
roles/sglang/defaults/main.yml) rendered for ``sglang_version`` by the flag tables the deploy plan
renders its argv with (sglang_perf/plan/profile.py): the deploy, the tests and the self-check run the
same flags. ``HAND_LAUNCH_ARGS``
is the original hand launch as it was typed (1-step NEXTN, no memory settings, the model's own
262144-token context): not a profile of the role, kept for what the emulator must reproduce of
it (its capacity). ``MODEL_ARGS`` is what the unit adds to every profile for this model."""
from __future__ import annotations

from sglang_perf import engines
from sglang_perf.plan.inherit import resolve
from sglang_perf.plan.profile import profile_engine, sglang_argv

MODEL_ARGS = ["--model-path", "/models/Qwen3.6-27B", "--served-model-name", "Qwen3.6-27B",
              "--tp-size", "2", "--trust-remote-code"]

HAND_LAUNCH_ARGS = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "1",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
                    "--mamba-radix-cache-strategy", "extra_buffer"]


def role_profiles():
    """{name: argv} of every SGLang profile in the role defaults (bases resolved), for the role's
    SGLang version: the inputs of a host of no inventory, as the planner (bench/planner.py) reads
    and checks every role input."""
    from bench import planner  # Ansible's: the commands that need no profile run without it
    v = planner.host_for(None, "emulated", roles=("sglang",)).values()
    flat = resolve(v["sglang_profiles"], model_dir=v["sglang_model_dir"])[0]
    return {name: sglang_argv(profile, v["sglang_version"]) for name, profile in flat.items()
            if profile_engine(profile, v["sglang_engine"]) == engines.DEFAULT}


PROFILE_ARGS = role_profiles()
