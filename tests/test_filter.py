"""The profile filter: profile -> argv per SGLang version, and each validation rule's message."""
from __future__ import annotations

import copy

import pytest

from sglang_perf import engines
from sglang_perf.plan import profile as f
from plugins.filter.systemd_exec_args import systemd_exec_args

from conftest import ROOT

GOOD = {
    "nextn_3step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 3,
                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "tp_size": 2,
                    "mem_fraction_static": 0.88, "context_length": 131072,
                    "max_running_requests": 16, "mamba_full_memory_ratio": 0.5,
                    "mamba_cache_strategy": "extra_buffer", "reasoning_parser": "qwen3",
                    "tool_call_parser": "qwen3_coder"},
    "nextn_1step": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 1,
                    "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 2, "tp_size": 2,
                    "mamba_cache_strategy": "extra_buffer"},
    "no_spec": {"tp_size": 2},
}
SERVER = {"model_path": "/srv/models/Qwen3.6-27B", "served_model_name": "Qwen3.6-27B",
          "host": "0.0.0.0", "port": 30000, "trust_remote_code": True, "enable_metrics": False}


def test_3step_profile_renders_the_recorded_launch_for_0_5_23():
    argv = f.sglang_argv(GOOD["nextn_3step"], "0.5.23", SERVER)
    assert argv == [
        "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--tp-size", "2",
        "--mem-fraction-static", "0.88", "--context-length", "131072",
        "--max-running-requests", "16", "--mamba-full-memory-ratio", "0.5",
        "--mamba-radix-cache-strategy", "extra_buffer", "--reasoning-parser", "qwen3",
        "--tool-call-parser", "qwen3_coder", "--model-path", "/srv/models/Qwen3.6-27B",
        "--served-model-name", "Qwen3.6-27B", "--host", "0.0.0.0", "--port", "30000",
        "--trust-remote-code"]


@pytest.mark.parametrize("version, flag", [
    ("0.5.10", "--mamba-scheduler-strategy"), ("0.5.13", "--mamba-scheduler-strategy"),
    ("0.5.14", "--mamba-radix-cache-strategy"), ("0.5.23", "--mamba-radix-cache-strategy"),
    ("0.5.6.post2", None), ("0.5.12.post1", "--mamba-scheduler-strategy")])
def test_mamba_flag_spelling_follows_the_version_table(version, flag):
    if flag is None:
        with pytest.raises(f.ProfileError, match="older than 0.5.10"):
            f.sglang_argv(GOOD["nextn_1step"], version)
        return
    argv = f.sglang_argv(GOOD["nextn_1step"], version)
    assert argv[argv.index("extra_buffer") - 1] == flag


def test_bad_version_string_names_the_variable():
    with pytest.raises(f.ProfileError, match="sglang_version: 'latest' is not an SGLang release"):
        f.sglang_argv(GOOD["no_spec"], "latest")


def test_good_profiles_have_no_errors():
    for name in GOOD:
        assert f.sglang_profile_errors(GOOD, name, gpu_count=2, min_accept_len=None) == []
    assert f.sglang_profile_errors(GOOD, "nextn_3step", 2, 2.8) == []


def bad(name, **changes):
    profiles = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if value is None:
            profiles[name].pop(key, None)
        else:
            profiles[name][key] = value
    return profiles


@pytest.mark.parametrize("profiles, name, kw, words", [
    (GOOD, "nextn_4step", {}, "sglang_profile: 'nextn_4step' is not defined in sglang_profiles "
                              "(defined: nextn_1step, nextn_3step, no_spec)"),
    (bad("nextn_3step", speculative_num_steps=None, speculative_eagle_topk=None), "nextn_3step",
     {}, "speculative_algorithm NEXTN needs sglang_profiles.nextn_3step.speculative_num_steps, "
         "sglang_profiles.nextn_3step.speculative_eagle_topk too (the original launch"),
    (bad("nextn_3step", speculative_num_draft_tokens=5), "nextn_3step", {},
     "speculative_num_draft_tokens must be speculative_num_steps + 1 = 4 when "
     "speculative_eagle_topk is 1, got 5"),
    (bad("nextn_3step", tp_size=4), "nextn_3step", {"gpu_count": 2},
     "sglang_profiles.nextn_3step.tp_size (4) exceeds the GPUs the host is expected to have "
     "(sglang_hardware.gpu_count = 2)"),
    (bad("nextn_3step", mem_fraction_static=1.2), "nextn_3step", {},
     "sglang_profiles.nextn_3step.mem_fraction_static must be a fraction strictly between 0 and 1"),
    (bad("nextn_3step", mem_fraction_static=0), "nextn_3step", {}, "strictly between 0 and 1"),
    (bad("nextn_3step", context_length="128k"), "nextn_3step", {},
     "sglang_profiles.nextn_3step.context_length must be a positive integer number of tokens, "
     "got '128k'"),
    (bad("nextn_3step", context_length=131072.5), "nextn_3step", {}, "context_length must be"),
    (GOOD, "nextn_3step", {"min_accept_len": 4.5},
     "sglang_gate_thresholds (4.5) cannot be met by profile nextn_3step: the accept length is "
     "at most 4 (speculative_num_draft_tokens)"),
    (GOOD, "no_spec", {"min_accept_len": 2.8}, "at most 1 (no speculative decoding)"),
    (bad("nextn_3step", speculative_algorithm="MTP"), "nextn_3step", {},
     "speculative_algorithm must be one of NEXTN, EAGLE"),
    (bad("nextn_3step", mamba_cache_strategy="fast"), "nextn_3step", {},
     "mamba_cache_strategy must be one of auto, no_buffer, extra_buffer, extra_buffer_lazy"),
    (bad("nextn_3step", mamba_scheduler_strategy="extra_buffer"), "nextn_3step", {},
     "sglang_profiles.nextn_3step.mamba_scheduler_strategy: unknown setting"),
    (bad("no_spec", speculative_num_steps=3), "no_spec", {},
     "sets speculative_num_steps without speculative_algorithm"),
    (bad("nextn_3step", max_running_requests=0), "nextn_3step", {},
     "max_running_requests must be an integer >= 1, got 0"),
    (bad("nextn_3step", speculative_num_steps=True), "nextn_3step", {},
     "speculative_num_steps must be an integer >= 1, got True"),
    ({}, "nextn_3step", {}, "sglang_profiles must be a non-empty mapping"),
])
def test_each_rule_names_the_variable(profiles, name, kw, words):
    errors = f.sglang_profile_errors(profiles, name, **kw)
    assert any(words in e for e in errors), errors


def test_systemd_exec_args_quotes_only_what_needs_it():
    assert systemd_exec_args(["/v/bin/python", "-m", "sglang.launch_server", "--port", "30000"]) \
        == "/v/bin/python -m sglang.launch_server --port 30000"
    assert systemd_exec_args(["--served-model-name", "my model", "100%", "$HOME"]) == \
        '--served-model-name "my model" "100%%" "$$HOME"'


@pytest.mark.parametrize("host", ["127.0.0.1", "127.3.2.1", "::1", "[::1]", "localhost", "LOCALHOST"])
def test_loopback_binds_need_no_key(host):
    assert f.sglang_exposure_errors(host, False, [], False) == []


@pytest.mark.parametrize("key, networks, open_", [
    (True, [], False), (False, ["10.1.230.0/24"], False), (False, [], True)])
def test_a_network_bind_needs_a_key_networks_or_the_opt_in(key, networks, open_):
    assert f.sglang_exposure_errors("0.0.0.0", key, networks, open_) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.230.172", "ct129.lan", "128.0.0.1"])
def test_an_open_network_bind_is_refused_naming_the_variables(host):
    errors = f.sglang_exposure_errors(host, False, [], False)
    assert len(errors) == 1
    for var in ("sglang_host = %s" % host, "sglang_api_key", "vault_sglang_api_key",
                "sglang_allowed_networks", "sglang_allow_open_network: true"):
        assert var in errors[0]


@pytest.mark.parametrize("host, words", [
    ("0.0.0.0:30000", "it carries a port (30000): give the address alone, the port in sglang_port"),
    ("[::1]:30000", "it carries a port (30000)"),
    ("http://10.1.230.172", "a URL, not an address"),
    ("my host", "neither an IP address nor a host name")])
def test_a_bind_address_sglang_cannot_bind_is_refused_by_name(host, words):
    errors = f.sglang_exposure_errors(host, True, [], False)
    assert errors and errors[0].startswith("sglang_host = %s is not valid: an IP address or host name" % host)
    assert words in errors[0]


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0", "::", "[::1]", "fd00::1", "ct129", "ct129.lan."])
def test_addresses_and_names_sglang_can_bind(host):
    assert f.sglang_host_problem(host) == ""


@pytest.mark.parametrize("key, typo, near", [
    ("reasoning_parser", "qwen-3", "qwen3"), ("tool_call_parser", "qwen3-coder", "qwen3_coder"),
    ("mamba_cache_strategy", "extra-buffer", "extra_buffer")])
def test_a_choice_sglang_refuses_is_refused_with_the_releases_choices(key, typo, near):
    profiles = copy.deepcopy(GOOD)
    profiles["nextn_3step"][key] = typo
    errors = f.sglang_profile_errors(profiles, "nextn_3step", version="0.5.23")
    assert len(errors) == 1
    assert errors[0].startswith("sglang_profiles.nextn_3step.%s must be one of auto, " % key)
    assert errors[0].endswith("(SGLang 0.5.23), got %r; did you mean %s?" % (typo, near))


def test_the_choices_follow_the_release():
    profiles = copy.deepcopy(GOOD)
    profiles["nextn_3step"]["reasoning_parser"] = "beam"  # added after 0.5.19
    assert f.sglang_profile_errors(profiles, "nextn_3step", version="0.5.23") == []
    assert "(SGLang 0.5.19), got 'beam'" in f.sglang_profile_errors(profiles, "nextn_3step",
                                                                   version="0.5.19")[0]
    assert f.choices_for("reasoning_parser", "0.5.12") is None  # before the table's first row
    assert f.choices_for("reasoning_parser", "latest") is None  # sglang_version's own check says why
    assert f.sglang_profile_errors(profiles, "nextn_3step", version="latest") == []


def test_the_algorithm_is_accepted_in_any_case_and_rendered_as_sglang_sees_it():
    profiles = copy.deepcopy(GOOD)
    profiles["nextn_3step"]["speculative_algorithm"] = "nextn"
    assert f.sglang_profile_errors(profiles, "nextn_3step", version="0.5.23") == []
    argv = f.sglang_argv(profiles["nextn_3step"], "0.5.23")
    assert argv[:2] == ["--speculative-algorithm", "NEXTN"]
    drift = engines.get("sglang").drift({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3},
                           {"speculative_algorithm": "nextn", "speculative_num_steps": 3}, "0.5.23")
    assert [d for d in drift["differences"] if d["setting"] == "speculative_algorithm"] == []


def test_systemd_run_properties_carry_the_units_service_settings():
    from plugins.filter.systemd_run_properties import systemd_run_properties
    unit = ("[Unit]\nDescription=x\n\n[Service]\nType=simple\nUser=sglang\n# a comment\n"
            "ExecStart=/opt/venv/bin/python -m sglang.launch_server \\\n  --port 30000\nRestart=on-failure\n"
            "RestartSec=5\nCapabilityBoundingSet=\nDeviceAllow=char-nvidia-frontend rw\n"
            "DeviceAllow=char-nvidia-uvm rw\nRestrictAddressFamilies=AF_UNIX AF_INET\n\n[Install]\n"
            "WantedBy=multi-user.target\n")
    assert systemd_run_properties(unit) == [
        "-p", "User=sglang", "-p", "CapabilityBoundingSet=", "-p", "DeviceAllow=char-nvidia-frontend rw",
        "-p", "DeviceAllow=char-nvidia-uvm rw", "-p", "RestrictAddressFamilies=AF_UNIX AF_INET"]
    assert systemd_run_properties("") == [] and systemd_run_properties(None) == []


@pytest.mark.parametrize("profile", ["nextn_3step", "vllm_mtp_3", "tune_sglang_block16_m88"])
def test_the_profile_a_rendered_unit_runs(profile):
    """systemd_unit_profile reads what the role's template writes (its [Unit] Description), so
    compare and the tuner start the profile the host's unit runs again and await its engine's
    readiness paths; a unit that names none, none."""
    import jinja2
    from plugins.filter.systemd_run_properties import systemd_unit_profile
    template = (ROOT / "roles" / "sglang" / "templates" / "sglang.service.j2").read_text()
    unit_section = template[template.index("[Unit]"):template.index("[Service]")]
    text = jinja2.Template(unit_section).render(
        sglang_deploy_plan={"release": {"label": "vLLM", "docs": "https://docs.vllm.ai"}},
        sglang_served_model_name="Qwen3.6-27B (local)", sglang_profile=profile)
    assert systemd_unit_profile(text + "[Service]\nUser=sglang\n") == profile
    assert systemd_unit_profile("[Unit]\nDescription=a hand-made server\n") is None
    assert systemd_unit_profile("") is None and systemd_unit_profile(None) is None
