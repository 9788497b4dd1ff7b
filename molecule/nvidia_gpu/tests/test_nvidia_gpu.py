"""What the nvidia_gpu role laid down in the container (converge.yml also checked that the
nvidia-smi check passes with 2 x RTX A6000 and fails clearly with 1 GPU or none)."""
from __future__ import annotations

import pytest

KEYRING = "/etc/apt/keyrings/nvidia-cuda.asc"


def deb822(text):
    fields = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
    return fields


@pytest.fixture(scope="module")
def test_key_fpr(host):
    return host.file("/var/tmp/molecule/repo-key.fpr").content_string.strip()


def test_repository_is_a_deb822_source_signed_by_the_keyring(host):
    f = host.file("/etc/apt/sources.list.d/nvidia-cuda.sources")
    assert f.exists and f.user == "root" and f.mode == 0o644
    src = deb822(f.content_string)
    assert src["Types"] == "deb"
    assert src["URIs"] == "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
    assert src["Suites"] == "/"
    assert src["Signed-By"] == KEYRING
    assert "Components" not in src  # a flat repository


def test_keyring_holds_the_checked_key(host, test_key_fpr):
    f = host.file(KEYRING)
    assert f.exists and f.user == "root" and f.mode == 0o644
    assert host.file("/etc/apt/keyrings").mode == 0o755
    out = host.check_output("gpg --batch --show-keys --with-colons %s" % KEYRING)
    fprs = [ln.split(":")[9] for ln in out.splitlines() if ln.startswith("fpr:")]
    assert fprs[0] == test_key_fpr


def test_driver_branch_is_pinned(host):
    f = host.file("/etc/apt/preferences.d/nvidia-driver-pin.pref")
    assert f.exists and f.mode == 0o644
    text = f.content_string
    assert "Package: cuda-drivers* nvidia-* libnvidia-*" in text
    assert "Pin: version 580.*" in text.splitlines()
    assert "Pin-Priority: 1001" in text.splitlines()


def test_apt_accepts_the_source_and_the_pin(host):
    # apt parses sources.list.d and preferences.d on every run: a malformed file is an error.
    r = host.run("apt-cache policy")
    assert r.rc == 0 and "E:" not in r.stderr and "W:" not in r.stderr, r.stderr
    r = host.run("apt-get check")
    assert r.rc == 0, r.stderr


def test_nouveau_is_blacklisted(host):
    text = host.file("/etc/modprobe.d/blacklist-nouveau.conf").content_string.splitlines()
    assert "blacklist nouveau" in text and "options nouveau modeset=0" in text


def test_persistence_daemon_runs_in_persistence_mode(host):
    f = host.file("/etc/systemd/system/nvidia-persistenced.service.d/persistence-mode.conf")
    assert f.exists and f.mode == 0o644
    lines = f.content_string.splitlines()
    assert lines.index("ExecStart=") < [i for i, ln in enumerate(lines) if "--persistence-mode" in ln][0]
    # systemd (PID 1 here) has read the drop-in (the role's daemon-reload) over prepare.yml's
    # stand-in of the package's unit: the override is what the daemon would start with.
    out = host.check_output("systemctl show --property DropInPaths,ExecStart nvidia-persistenced")
    assert "/etc/systemd/system/nvidia-persistenced.service.d/persistence-mode.conf" in out
    assert "--persistence-mode" in out and out.count("argv[]=") == 1


def test_nothing_was_installed_from_nvidia(host):
    assert not host.package("cuda-drivers-580").is_installed
    assert not host.file("/usr/bin/nvidia-persistenced").exists
