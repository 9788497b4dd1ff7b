"""The vLLM emulator's drafters: `--speculative-config` with "method": "dflash" or "eagle3" and a
drafter directory ("model"), resolved and refused as vLLM 0.33.0's config/speculative.py does, run
on the same acceptance and step-time model as the SGLang emulator's DFLASH / EAGLE3, counted as
vLLM's v1/spec_decode/metrics.py counts them, sized as vllm/capacity.py sizes them.

vLLM's messages below were read from its source and checked by building SpeculativeConfig in the
contract venv (tests/contract/vllm_parse.py's stand-in target, drafter directories like the ones
here); pydantic's field errors are 2.14's."""
from __future__ import annotations

import json
import logging
import math
import os

import pytest

from conftest import free_port, role_defaults
from sglang_perf.plan import profile as flt
from test_emulator_vllm import Vllm, check_spec, get, metrics, run_cli, sse

pytestmark = pytest.mark.timeout(120)

TARGET = "/srv/models/Qwen3.6-27B"
ARCH = "Qwen3_5ForConditionalGeneration"
SERVER = {"model_path": TARGET, "served_model_name": "Qwen3.6-27B", "host": "127.0.0.1",
          "port": 30000, "trust_remote_code": True, "enable_metrics": True}
LAB = '{model_name="Qwen3.6-27B",engine="0"}'
# z-lab's DFlash drafters' config.json: a Qwen3 draft (model_type qwen3, architecture
# DFlashDraftModel) of 5 layers whose block is dflash_config.block_size (vLLM 0.33 does not read
# it: the block is num_speculative_tokens + 1)
DFLASH_CONFIG = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "num_hidden_layers": 5,
                 "max_position_embeddings": 40960,
                 "dflash_config": {"block_size": 16, "mask_token_id": 248077,
                                   "target_layer_ids": [1, 16, 31, 46, 61]}}
# an EAGLE-3 head in SpecForge's layout (LlamaForCausalLMEagle3, one layer)
EAGLE3_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1}


def write_drafter(path, config):
    os.makedirs(path, exist_ok=True)
    if config is not None:
        with open(os.path.join(path, "config.json"), "w") as fh:
            json.dump(config, fh)
    return str(path)


@pytest.fixture
def drafters(tmp_path):
    return {"dflash": write_drafter(tmp_path / "Qwen3.6-27B-DFlash", DFLASH_CONFIG),
            "eagle3": write_drafter(tmp_path / "Qwen3.6-27B-EAGLE3", EAGLE3_CONFIG)}


def rendered_vllm_dflash(drafter):
    """The role's vllm_dflash profile as the repo's renderer (sglang_perf engines/vllm.py) renders
    it, the drafter moved to ``drafter`` (its rendered path is on the host: /srv/models/...)."""
    defaults = role_defaults()
    argv = flt.sglang_argv(defaults["sglang_profiles"]["vllm_dflash"], defaults["sglang_vllm_version"],
                           dict(SERVER))
    i = argv.index("--speculative-config") + 1
    spec = json.loads(argv[i])
    assert spec == {"method": "dflash", "num_speculative_tokens": 15,
                    "model": "/srv/models/Qwen3.6-27B-DFlash"}, spec
    argv[i] = json.dumps(dict(spec, model=drafter))
    return argv


def resolve(spec, *extra):
    from emulator.vllm.args import parse
    from emulator.vllm.args import resolve as vllm_resolve
    return vllm_resolve(parse(["serve", TARGET, "-tp", "2", "--max-model-len", "131072",
                               "--max-num-seqs", "8", *extra,
                               "--speculative-config", json.dumps(spec)]), ARCH)


def sglang_scheduler(argv):
    """The SGLang emulator's scheduler for the same drafting (its expected-figure functions)."""
    from emulator.cli import offline_scheduler
    return offline_scheduler(["--model-path", TARGET, "--tp-size", "2", "--context-length", "131072",
                              "--max-running-requests", "8"] + argv, {})


def sglang_dflash(drafter, block):
    return sglang_scheduler(["--speculative-algorithm", "DFLASH", "--speculative-num-draft-tokens",
                             str(block), "--speculative-draft-model-path", drafter])


def sglang_eagle3(drafter, steps):
    return sglang_scheduler(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(steps),
                             "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                             str(steps + 1), "--speculative-draft-model-path", drafter])


@pytest.fixture
def serve():
    started = []

    def start(argv, env=None):
        emu = Vllm(argv, env)
        started.append(emu)
        try:
            emu.wait_ready(timeout=30)
        except RuntimeError as exc:
            raise AssertionError("%s: %s" % (exc, emu.output())) from None
        return emu

    yield start
    for emu in started:
        emu.stop()


def spec_argv(spec, *extra):
    return ["serve", TARGET, "-tp", "2", "--gpu-memory-utilization", "0.9", "--max-model-len", "131072",
            "--max-num-seqs", "8", "--served-model-name", "Qwen3.6-27B", "--language-model-only",
            "--per-request-spec-decode-metrics", "summary", *extra,
            "--speculative-config", json.dumps(spec)]


def stats(emu):
    return json.loads(get(emu.url + "/_emulator/stats")[1])


def complete(emu, tokens, prompt="def add(a, b):"):
    """One /v1/completions request streamed with its usage chunk: its speculative_decoding."""
    events = sse(emu.url + "/v1/completions", {"prompt": prompt, "max_tokens": tokens, "ignore_eos": True,
                                               "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    assert events[-2]["usage"]["completion_tokens"] == tokens
    return events[-2]["metrics"]["speculative_decoding"]


def delta(after, before, name, labels=LAB):
    return after[name + labels] - before.get(name + labels, 0.0)


# ------------------------------------------------------------------ the repo's vllm_dflash ---
def test_the_rendered_vllm_dflash_argv_is_accepted_and_served(drafters, serve):
    from emulator.vllm.args import parse
    from emulator.vllm.args import resolve as vllm_resolve
    argv = rendered_vllm_dflash(drafters["dflash"])
    cfg = vllm_resolve(parse(argv), ARCH)
    # vLLM: 15 speculative tokens, the drafter loaded; the block the shared scheduler verifies is
    # those 15 and the anchor (v1/spec_decode/dflash.py: 1 + num_speculative_tokens queries)
    assert cfg["speculative_config"]["method"] == "dflash" and cfg["num_speculative_tokens"] == 15
    assert (cfg["speculative_algorithm"], cfg["speculative_num_draft_tokens"]) == ("DFLASH", 16)
    assert cfg["speculative_draft_model_path"] == drafters["dflash"]
    emu = serve(argv)  # exactly as rendered (EmulatorProcess appends a free --port after it)
    assert get(emu.url + "/health") == (200, b"")
    card = json.loads(get(emu.url + "/v1/models")[1])["data"][0]
    assert (card["id"], card["max_model_len"]) == ("Qwen3.6-27B", 131072)
    spec = complete(emu, 200)
    check_spec(spec, 15)  # RequestSpecDecodeMetrics: a histogram of k + 1 = 16 buckets
    log = emu.output()
    assert "Loading drafter model..." in log
    # the GDN state at k = 15 (conv (3 + 15) x 5120 x 2 B + SSM 1,572,864 B) needs 864-token pages;
    # 14.06 GiB of KV memory (the drafter's 1.61 GiB weights in place of the MTP layer's 0.44)
    # make 448 blocks of 19 pages, a 131,072-token request takes 152 + 3 x (2 + 15) of them
    assert "Setting attention block size to 864 tokens" in log
    assert "GPU KV cache size: 289,262 tokens, Maximum concurrency for 131,072 tokens per request: " \
           "2.21x" in log


# ------------------------------------------------------- same model as SGLang's DFLASH -------
CONFIGURED = ("cycle_time_s", "attention_s_per_context_token", "accept_probs",
              "expected_accept_length_short_context", "expected_accept_length_coding_prompt",
              "expected_accept_length_32k_context", "expected_accept_length_thinking",
              "nominal_c1_decode_tok_s", "nominal_c1_decode_tok_s_32k_context",
              "speculative_num_steps", "speculative_num_draft_tokens")


def accepted_moments(probs):
    """Mean and variance of the drafts one verify accepts (position i only if all before were)."""
    mean, square, reach = 0.0, 0.0, 1.0
    for i, p in enumerate(probs, start=1):
        reach *= p  # P(accepted >= i)
        mean += reach
        square += (2 * i - 1) * reach
    return mean, square - mean * mean


def test_dflash_runs_sglangs_dflash_model_at_the_same_block(drafters, serve):
    """k = 15 on vLLM is SGLang's block of 16: the same acceptance per position, decline with
    context and inside thinking, and step time (configured figures identical), and at C=1 the
    served acceptance length and decode speed agree with Scheduler's expected figures within
    4 standard deviations of the mean (acceptance) and 10 % (speed, as tests/test_emulator_vllm.py
    holds MTP's)."""
    sgl = sglang_dflash(drafters["dflash"], 16)
    scale = 25.0
    emu = serve(spec_argv({"method": "dflash", "num_speculative_tokens": 15, "model": drafters["dflash"]}),
                {"SGLEMU_SPEED_SCALE": str(scale), "SGLEMU_CLOCK_JITTER_PCT": "0"})
    configured = stats(emu)["configured"]
    expected = sgl.configured()
    for key in CONFIGURED:  # the nominal speeds are reported at SPEED_SCALE
        want = expected[key] * scale if key.startswith("nominal") else expected[key]
        assert configured[key] == pytest.approx(want, rel=1e-12), key
    assert configured["speculative_algorithm"] == "DFLASH"

    before = metrics(emu.url)
    spec = complete(emu, 5000)
    after = metrics(emu.url)
    req = [r for r in stats(emu)["requests"] if not r["health"]][-1]
    drafts = delta(after, before, "vllm:spec_decode_num_drafts_total")
    accepted = delta(after, before, "vllm:spec_decode_num_accepted_tokens_total")
    mean, var = accepted_moments(sgl._probs_for(req["prompt_tokens"]))
    assert 1 + mean == pytest.approx(sgl.expected_accept_length(req["prompt_tokens"]))
    tolerance = 4 * math.sqrt(var / drafts)
    assert abs(accepted / drafts - mean) < tolerance, (accepted / drafts, mean, tolerance)
    assert spec["mean_acceptance_length"] == pytest.approx(1 + accepted / drafts)
    measured = req["decode_tok_s"] / scale
    assert measured == pytest.approx(sgl.decode_tok_s_at(req["prompt_tokens"]), rel=0.10), measured


# ------------------------------------------------------------ vLLM's per-step counters ------
@pytest.mark.parametrize("method, k", [("dflash", 15), ("dflash", 5), ("eagle3", 3)])
def test_counters_are_vllms_per_step_accounting(drafters, serve, method, k):
    """v1/spec_decode/metrics.py SpecDecodingStats.observe_draft once per verify step of each
    request: drafts, k draft tokens, the accepted ones, and per position i the steps that accepted
    more than i; one inter-token latency observation per step (v1/metrics/stats.py)."""
    emu = serve(spec_argv({"method": method, "num_speculative_tokens": k, "model": drafters[method]}))
    before = metrics(emu.url)
    hist = [0] * (k + 1)
    for i in range(4):
        spec = complete(emu, 120 + 37 * i)
        check_spec(spec, k)
        hist = [a + b for a, b in zip(hist, spec["acceptance_histogram"])]
    after = metrics(emu.url)
    drafts = delta(after, before, "vllm:spec_decode_num_drafts_total")
    accepted = delta(after, before, "vllm:spec_decode_num_accepted_tokens_total")
    assert drafts == sum(hist) > 0
    assert delta(after, before, "vllm:spec_decode_num_draft_tokens_total") == k * drafts
    assert accepted == sum(j * c for j, c in enumerate(hist))
    per_pos = [delta(after, before, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
                     '{model_name="Qwen3.6-27B",engine="0",position="%d"}' % i) for i in range(k)]
    assert not any('position="%d"' % k in name for name in after)  # positions 0..k-1 only
    assert per_pos == [sum(hist[i + 1:]) for i in range(k)]
    assert all(a >= b for a, b in zip(per_pos, per_pos[1:]))  # P(>= i + 1) never rises
    assert sum(per_pos) == accepted  # accepted / drafts = the mean accepted per step
    assert delta(after, before, "vllm:inter_token_latency_seconds_count") == drafts
    # the configured model is the SGLang emulator's for the same drafting
    sgl = sglang_dflash(drafters[method], k + 1) if method == "dflash" \
        else sglang_eagle3(drafters[method], k)
    assert stats(emu)["configured"]["expected_accept_length_short_context"] == \
        pytest.approx(sgl.expected_accept_length(0), rel=1e-12)


def test_eagle3_runs_sglangs_chain(drafters):
    from emulator.scheduler import Scheduler
    from emulator.vllm import capacity
    from emulator.vllm.cli import vllm_knobs

    cfg = resolve({"method": "eagle3", "num_speculative_tokens": 3, "model": drafters["eagle3"]})
    assert (cfg["speculative_algorithm"], cfg["speculative_num_steps"],
            cfg["speculative_num_draft_tokens"]) == ("EAGLE3", 3, 4)
    knobs, mem = vllm_knobs({})
    cap = capacity.compute(cfg, knobs.gpu_memory_mib, drafter_params_b=knobs.drafter_params_b, **mem)
    ours, theirs = Scheduler(cfg, knobs, None, "", cap), sglang_eagle3(drafters["eagle3"], 3)
    assert ours.base_probs == theirs.base_probs == [0.62] * 3
    for prompt, thinking in ((0, False), (128, False), (32768, False), (128, True)):
        assert ours.expected_accept_length(prompt, thinking) == \
            theirs.expected_accept_length(prompt, thinking)
    assert ours.decode_tok_s_at(4096) == theirs.decode_tok_s_at(4096)


# ---------------------------------------------------------------- resolution and refusals ----
def test_the_method_is_detected_from_the_drafters_name(drafters, caplog):
    caplog.set_level(logging.INFO)
    cfg = resolve({"model": drafters["dflash"], "num_speculative_tokens": 7})
    assert cfg["speculative_config"]["method"] == "dflash" and cfg["speculative_num_draft_tokens"] == 8
    # the draft's 40960 positions are raised to the target's max_model_len (default RoPE)
    assert "Overriding draft model max_position_embeddings from 40960 to the target model's " \
           "max_model_len (131072)" in caplog.text


def test_n_predict_in_the_drafters_config_gives_the_tokens(tmp_path):
    drafter = write_drafter(tmp_path / "d-DFlash", dict(DFLASH_CONFIG, n_predict=4))
    assert resolve({"method": "dflash", "model": drafter})["num_speculative_tokens"] == 4
    assert resolve({"method": "dflash", "model": drafter, "num_speculative_tokens": 8})[
        "num_speculative_tokens"] == 8
    with pytest.raises(ValueError, match="^num_speculative_tokens:6 must be divisible by n_predict=4$"):
        resolve({"method": "dflash", "model": drafter, "num_speculative_tokens": 6})


def test_dflashs_draft_pass_caps_the_running_requests(drafters, caplog):
    """config/vllm.py: max_num_batched_tokens (2048) // (k + 1) requests fit the draft pass."""
    from emulator.vllm.args import parse
    from emulator.vllm.args import resolve as vllm_resolve
    cfg = vllm_resolve(parse(["serve", TARGET, "--speculative-config", json.dumps(
        {"method": "dflash", "num_speculative_tokens": 15, "model": drafters["dflash"]})]), ARCH)
    assert (cfg["max_num_seqs"], cfg["max_num_active_seqs"]) == (256, 128)
    assert "The dflash draft pass needs 16 query tokens per request within max_num_batched_tokens=2048. " \
           "Overriding max_num_active_seqs from 256 to 128." in caplog.text
    assert resolve({"method": "dflash", "num_speculative_tokens": 15, "model": drafters["dflash"]})[
        "max_num_active_seqs"] is None  # 8 fit


PYDANTIC = "1 validation error for SpeculativeConfig\nnum_speculative_tokens\n  "


@pytest.mark.parametrize("spec, message", [
    ({"method": "dflash", "num_speculative_tokens": 15},
     "num_speculative_tokens was provided but without speculative model."),
    ({"method": "eagle3", "num_speculative_tokens": 3},
     "num_speculative_tokens was provided but without speculative model."),
    ({"method": "dflash"},
     "num_speculative_tokens must be provided with speculative model unless the draft model config "
     "contains an n_predict parameter."),
    ({"method": "dflash", "model": "{dflash}"},
     "A speculative model was provided, but `num_speculative_tokens` was not provided"),
    ({"method": "eagle3", "model": "{eagle3}"},
     "A speculative model was provided, but `num_speculative_tokens` was not provided"),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": 0},
     PYDANTIC + "Input should be greater than 0 [type=greater_than, input_value=0, input_type=int]\n"
     "    For further information visit https://errors.pydantic.dev/2.14/v/greater_than"),
    ({"method": "eagle3", "model": "{eagle3}", "num_speculative_tokens": -1},
     PYDANTIC + "Input should be greater than 0 [type=greater_than, input_value=-1, input_type=int]"),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": 3.5},
     PYDANTIC + "Input should be a valid integer, got a number with a fractional part "
     "[type=int_from_float, input_value=3.5, input_type=float]"),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": "x"},
     PYDANTIC + "Input should be a valid integer, unable to parse string as an integer "
     "[type=int_parsing, input_value='x', input_type=str]"),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": None},
     PYDANTIC + "Input should be a valid integer [type=int_type, input_value=None, input_type=NoneType]"),
    ({"method": "dflash", "model": 5, "num_speculative_tokens": 15},
     "1 validation error for SpeculativeConfig\nmodel\n  Input should be a valid string "
     "[type=string_type, input_value=5, input_type=int]"),
    ({"method": "dflash", "model": "{eagle3}", "num_speculative_tokens": 15},
     "Model architectures ['DFlashLlamaForCausalLMEagle3'] are not supported for now. Supported "
     "architectures: "),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": 15, "tensor_parallel_size": 2},
     "'tensor_parallel_size' is not a valid argument in the speculative_config. Please pass "
     "'draft_tensor_parallel_size' instead."),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": 15, "draft_tensor_parallel_size": 3},
     "speculative_draft_tensor_parallel_size=3 cannot be other value than 1 or target model "
     "tensor_parallel_size"),
    ({"method": "dflash", "model": "{dflash}", "num_speculative_tokens": 2047},
     "VllmConfig does not have enough slots to schedule a token and support the speculative decoding "
     "settings. Got max_num_batched_tokens=2048 and num_lookahead_tokens=2048."),
])
def test_refusals_carry_vllms_own_message(drafters, spec, message):
    spec = {key: value.format(**drafters) if isinstance(value, str) else value for key, value in spec.items()}
    with pytest.raises(ValueError) as info:
        resolve(spec)
    text = info.value.args[0]
    assert text.startswith(message), text


def test_a_drafter_directory_without_its_config_is_refused(tmp_path):
    """The draft's ModelConfig reads its config.json while the engine config is built, before any
    weights load (transformers' error for a directory without it, AutoConfig's without model_type)."""
    empty = write_drafter(tmp_path / "empty-DFlash", None)
    with pytest.raises(ValueError) as info:
        resolve({"method": "dflash", "model": empty, "num_speculative_tokens": 15})
    assert info.value.args[0] == (
        f"Invalid repository ID or local directory specified: '{empty}'.\nPlease verify the following "
        "requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory "
        "that contains a recognized configuration file.\n   - For Hugging Face models: ensure the "
        "presence of a 'config.json'.\n   - For Mistral models: ensure the presence of a 'params.json'.\n")
    untyped = write_drafter(tmp_path / "untyped-DFlash", {"architectures": ["DFlashDraftModel"]})
    with pytest.raises(ValueError, match="^Unrecognized model in %s. Should have a `model_type` key in "
                                         "its config.json.$" % untyped):
        resolve({"method": "dflash", "model": untyped, "num_speculative_tokens": 15})


def test_a_missing_drafter_fails_the_start(tmp_path):
    """Exit 1 with vLLM's traceback, nothing ever listening (the serve process dies while the
    engine config is built, before the weights load)."""
    missing = str(tmp_path / "not-downloaded-DFlash")
    port = free_port()
    proc = run_cli(spec_argv({"method": "dflash", "model": missing, "num_speculative_tokens": 15},
                             "--port", str(port)), env={"SGLEMU_LOAD_SECONDS": "5"})
    assert proc.returncode == 1, proc.stderr
    assert "ValueError: Invalid repository ID or local directory specified: '%s'." % missing in proc.stderr
    assert "Starting vLLM server" not in proc.stderr


# ---------------------------------------------------------------------- memory / capacity ----
def test_the_drafters_weights_and_cache_are_the_sglang_emulators(drafters):
    from emulator import memory
    from emulator.cli import load_seconds
    from emulator.knobs import Knobs
    from emulator.vllm import capacity
    from emulator.vllm.cli import vllm_knobs

    knobs, mem = vllm_knobs({})
    caps = {}
    for name, spec in (("mtp", {"method": "mtp", "num_speculative_tokens": 15}),
                       ("dflash", {"method": "dflash", "num_speculative_tokens": 15,
                                   "model": drafters["dflash"]})):
        cfg = resolve(spec, "--gpu-memory-utilization", "0.9", "--language-model-only")
        caps[name] = capacity.compute(cfg, knobs.gpu_memory_mib, drafter_params_b=knobs.drafter_params_b,
                                      **mem)
    mtp, dflash = caps["mtp"], caps["dflash"]
    # weights: SGLang's drafter figure (1.73 B params in BF16 over 2 GPUs) in place of the MTP layer
    sgl = sglang_dflash(drafters["dflash"], 16).capacity
    assert dflash.draft_weights_gib == sgl.draft_weights_gib == memory.drafter_weights_gib(1.73, 2)
    assert mtp.available_kv_cache_memory_gib - dflash.available_kv_cache_memory_gib == \
        pytest.approx(dflash.draft_weights_gib - mtp.draft_weights_gib)
    # cache: SGLang's 10,240 bytes per token over 2 GPUs in 2,048-byte attention pages: 3 layers
    assert sgl.kv_bytes_per_token - sgl.target_kv_bytes_per_token == 10240 // 2
    assert dflash.drafter_layer_pages == math.ceil(10240 / 2 / dflash.attn_page_bytes_per_token) == 3
    assert (dflash.attention_layers, mtp.attention_layers) == (16 + 3, 16 + 1)
    # the GDN state holds k = 15 speculative slots either way (vLLM's num_speculative_blocks)
    assert dflash.block_size == mtp.block_size == 864
    assert dflash.mamba_blocks_per_request == (dflash.num_groups - 1) * (2 + 15)
    assert dflash.kv_cache_size_tokens < mtp.kv_cache_size_tokens
    # the drafter loads after the target in the same time per weight (the SGLang side's rule)
    k = Knobs.from_env({"SGLEMU_LOAD_SECONDS": "10"})
    cfg = resolve({"method": "dflash", "num_speculative_tokens": 15, "model": drafters["dflash"]})
    assert load_seconds(cfg, k) == pytest.approx(10 * (1 + 1.73 / memory.TARGET_PARAMS_B))
    assert load_seconds(resolve({"method": "mtp", "num_speculative_tokens": 3}), k) == 10
