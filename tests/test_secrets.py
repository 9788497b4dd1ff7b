"""Secrets: the API key and the Hugging Face token come from an ansible-vault file and appear in
no Ansible output (at -vvv), no unit or world-readable file on the host, no argv and no benchmark
report; the gate still authenticates with the key. Also: the example vault decrypts with the
password the README documents."""
from __future__ import annotations

import json
import secrets

import yaml

from ansiblerun import ansible
from conftest import ROOT
from hostutil import needs_local_host, on_host, play


def vault_file(tmp_path, data):
    plain = tmp_path / "secrets.yml"
    plain.write_text("---\n" + "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in data.items()))
    pw = tmp_path / "pass"
    pw.write_text(secrets.token_hex(16) + "\n")
    assert ansible("ansible-vault", "encrypt", "--vault-password-file", str(pw), str(plain)).returncode == 0
    assert plain.read_text().startswith("$ANSIBLE_VAULT;1.1;AES256")
    return plain, pw


def test_the_example_vault_decrypts_with_the_documented_password(tmp_path):
    """The README's rekey step names the example's old password: the one that opens it, and it
    holds the two variables the inventory reads (as YAML, not as text)."""
    line = next(x for x in (ROOT / "README.md").read_text().splitlines() if "ansible-vault rekey" in x)
    pw = tmp_path / "pass"
    pw.write_text(line.split("# old:", 1)[1].strip() + "\n")
    p = ansible("ansible-vault", "view", "--vault-password-file", str(pw),
                "inventories/production/vault.example.vault")
    assert p.returncode == 0, p.stderr
    assert set(yaml.safe_load(p.stdout)) == {"vault_sglang_api_key", "vault_sglang_hf_token"}


@needs_local_host
def test_secrets_never_leak(tmp_path):
    # from whatever the container runs: the keyed deploy is a whole gated deploy of its own
    key = "sk-" + secrets.token_hex(20)
    token = "hf_" + secrets.token_hex(16)
    vault, pw = vault_file(tmp_path, {"sglang_api_key": key, "sglang_hf_token": token})
    report = tmp_path / "report"
    try:
        p = play("deploy.yml", "-e", "@%s" % vault, "--vault-password-file", str(pw), "-vvv")
        assert p.returncode == 0, p.stdout[-3000:]
        b = play("playbooks/bench.yml", "-e", "@%s" % vault, "--vault-password-file", str(pw),
                 "-e", "bench_report_dir=%s" % report, "-vvv")
        assert b.returncode == 0, b.stdout[-3000:]
        for output in (p.stdout + p.stderr, b.stdout + b.stderr):
            assert key not in output and token not in output
        for f in report.iterdir():
            assert key not in f.read_text() and token not in f.read_text()
        # the key is in force: without it the server answers 401
        assert on_host("curl -s -o /dev/null -w %{http_code} http://127.0.0.1:30000/v1/models") \
            == "401"
        pid = on_host("systemctl show -p MainPID --value sglang")
        assert key not in on_host("cat /proc/%s/cmdline" % pid)
        for path in ("/etc/systemd/system/sglang.service", "/etc/sglang/sglang.env"):
            assert key not in on_host("cat %s" % path)
        assert on_host("stat -c '%a %U %G' /etc/sglang/sglang-secrets.yaml") == "640 root sglang"
        # (this very command's AnsiballZ file under /root/.ansible/tmp carries the pattern)
        leaks = on_host("sh -c 'find / -xdev -type f -perm -o+r -size -20M "
                        "-not -path \"/root/.ansible/tmp/*\" 2>/dev/null "
                        "| xargs -r grep -l -F -e %s -e %s 2>/dev/null; true'" % (key, token))
        assert leaks == "", "world-readable files holding a secret: " + leaks
    finally:
        # back to a server without a key for the other tests
        r = play("deploy.yml")
        assert r.returncode == 0, r.stdout[-2000:]
    assert on_host("sh -c 'test -e /etc/sglang/sglang-secrets.yaml && echo present || echo gone'") \
        == "gone"

