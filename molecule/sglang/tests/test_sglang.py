"""The sglang role alone: what it installed, the unit it rendered, the running service, the
restarts (none by the idempotence run, one per profile change in side_effect.yml), and the model
downloaded from the stand-in hub with a token that is gone afterwards."""
from __future__ import annotations

import json
from collections import Counter

from conftest import ROOT, UNIT, assert_service_healthy, exec_start, main_pid

# the scenario's own requirements (the Hugging Face CLI besides the emulator): its release
DOWNLOAD_VARS = ["-e", "@%s" % (ROOT / "molecule/sglang/vars/download.yml")]


def venv(host):
    """The venv of the release the unit runs (/opt/sglang/releases/<release>/venv)."""
    python = exec_start(host.file(UNIT).content_string)[0]
    assert python.startswith("/opt/sglang/releases/") and python.endswith("/venv/bin/python"), python
    return python[:-len("/bin/python")]


def test_service_user_is_a_system_user_without_login(host):
    user = host.user("sglang")
    assert user.exists and user.uid < 1000
    assert user.group == "sglang" and {"video", "render"} <= set(user.groups)
    assert user.shell == "/usr/sbin/nologin" and user.home == "/var/lib/sglang"


def test_directories(host):
    for path, owner, group, mode in [
        ("/opt/sglang", "root", "root", 0o755),
        ("/opt/sglang/releases", "root", "root", 0o755),
        ("/etc/sglang", "root", "sglang", 0o750),
        ("/var/lib/sglang", "sglang", "sglang", 0o750),
        ("/srv/models", "sglang", "sglang", 0o755),
    ]:
        d = host.file(path)
        assert d.is_directory and (d.user, d.group, d.mode) == (owner, group, mode), path


def test_venv_holds_the_server_and_is_root_owned(host):
    v = venv(host)
    assert host.file(v + "/bin/python").user == "root"
    assert host.file(v + "/lib").user == "root"
    out = host.check_output(v + "/bin/python -m pip show sglang-emulator")
    assert "Version: 0.5.23" in out
    host.check_output(v + "/bin/python -c 'import emulator, aiohttp, yaml'")
    release = v[:-len("/venv")]
    assert host.file(release + "/wheels/sglang_emulator-0.5.23-py3-none-any.whl").exists
    assert host.file(release + "/constraints.txt").contains("^aiohttp==3.14.5$")
    meta = json.loads(host.file(release + "/release.json").content_string)
    assert meta["release"] == release.rsplit("/", 1)[1]


def test_environment_file_and_no_secrets_file(host):
    env = host.file("/etc/sglang/sglang.env")
    assert (env.user, env.group, env.mode) == ("root", "sglang", 0o640)
    assert "HF_HUB_OFFLINE=1" in env.content_string.splitlines()
    assert not host.file("/etc/sglang/sglang-secrets.yaml").exists  # no API key set


def test_unit_is_the_rendered_profile(host, rendered_unit):
    installed = host.file(UNIT).content_string
    rendered = rendered_unit("nextn_3step", *DOWNLOAD_VARS)
    assert installed == rendered
    argv = exec_start(installed)
    assert argv[:3] == [venv(host) + "/bin/python", "-m", "emulator"]
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    # systemd runs exactly that argv
    shown = host.check_output("systemctl show --property ExecStart --value sglang")
    assert "argv[]=%s ;" % " ".join(argv) in shown


def test_service_runs_hardened_as_sglang_and_answers(host):
    pid = assert_service_healthy(host)
    assert "NoNewPrivs:\t1" in host.check_output("cat /proc/%d/status" % pid)
    # The sandbox is in force (systemd needs the container's CAP_SYS_ADMIN for it): in the
    # server's mount namespace / is read-only but the state directory (ProtectSystem=strict,
    # ReadWritePaths) and /tmp is its own (PrivateTmp).
    mounts = {}
    for line in host.check_output("cat /proc/%d/mountinfo" % pid).splitlines():
        fields = line.split()
        mounts[fields[4]] = (fields[3], fields[5].split(","))  # mount point -> (root, options)
    assert "ro" in mounts["/"][1]
    assert "rw" in mounts["/var/lib/sglang"][1]
    assert "systemd-private-" in mounts["/tmp"][0] and "-sglang.service-" in mounts["/tmp"][0]


def test_no_restart_by_the_idempotence_run_and_one_per_profile_change(host):
    def recorded(name):
        return int(host.file("/var/tmp/molecule/mainpid." + name).content_string)

    assert recorded("idempotence") == recorded("converge"), "the idempotence run restarted sglang"
    assert recorded("side_effect") != recorded("converge"), "changing the profile did not restart sglang"
    assert main_pid(host) == recorded("side_effect"), "sglang restarted after side_effect.yml"


def test_unit_exposure_score_is_printed_and_at_most_4(host, capsys):
    """systemd-analyze security on the installed, running unit (systemd 252 in the container)."""
    out = host.check_output("systemd-analyze security --no-pager sglang.service")
    score = float(out.strip().splitlines()[-1].split(":")[1].split()[0])
    with capsys.disabled():
        print("\nsystemd-analyze security sglang.service: overall exposure %.1f" % score)
    assert score <= 4.0, out


HUB = "/var/tmp/molecule/hub"
MODEL = "/srv/models/Qwen3.6-27B"
FILES = ["config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
         "model.safetensors.index.json"]


def hub_requests(host):
    return [json.loads(ln) for ln in host.file(HUB + "/requests.jsonl").content_string.splitlines()]


def test_the_model_came_from_the_hub_once_with_the_token(host):
    """Every repository request carried the token; each file was fetched once by converge, the
    second shard once more after side_effect truncated it; the idempotence run and the snapshot
    cases fetched nothing."""
    reqs = [r for r in hub_requests(host) if r["path"].startswith(("/api/models/", "/Qwen/"))]
    assert reqs and all(r["token"] and r["status"] == 200 for r in reqs), reqs
    gets = Counter(r["path"].rsplit("/", 1)[1] for r in reqs
                   if r["method"] == "GET" and "/resolve/" in r["path"])
    assert gets == {FILES[0]: 1, FILES[1]: 1, FILES[2]: 2, FILES[3]: 1}
    for f in FILES:
        assert host.file("%s/%s" % (MODEL, f)).user == "sglang", f
    assert host.file(MODEL + "/.cache/huggingface/download/config.json.metadata").exists


def test_the_token_is_gone_and_was_never_written_or_logged(host):
    hf = host.file("/var/lib/sglang/hf")
    assert hf.is_directory and (hf.user, hf.group, hf.mode) == ("sglang", "sglang", 0o700)
    assert not host.file("/var/lib/sglang/hf/token").exists
    # grep reads the token from the hub's file: it is never in this process's output
    found = host.run("grep -rlF -f %s/token /var/lib/sglang /etc/sglang /etc/systemd/system /srv/models"
                     % HUB)
    assert found.rc == 1, "the token is in " + found.stdout
    journal = host.run("journalctl --no-pager -o cat | grep -cF -f %s/token" % HUB)
    assert journal.stdout.strip() == "0", "the token is in the journal"
    log = ROOT / "out" / "molecule" / "sglang.log"
    if log.exists():
        token = host.file(HUB + "/token").content_string.strip()
        leaked = token in log.read_text(errors="replace")
        assert not leaked, "the token is in out/molecule/sglang.log"
