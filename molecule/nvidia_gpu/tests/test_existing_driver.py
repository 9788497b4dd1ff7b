"""The instance with a working driver (gpu_existing): converge.yml ran the role there as a container
on its hypervisor host's 580.95.05 and as bare metal on 590.48.01, both left alone and their 2 GPUs
checked, and saw its refusals. Nothing of NVIDIA's may be on it: no repository, key, pin, nouveau
blacklist, persistence override, DKMS or NVIDIA package, and no package the role would install."""
from __future__ import annotations

import pytest
import testinfra

EXISTING = "sglang-molecule-nvidia_gpu-existing"


@pytest.fixture(scope="module")
def existing():
    return testinfra.get_host("podman://" + EXISTING)


@pytest.mark.parametrize("path", [
    "/etc/apt/sources.list.d/nvidia-cuda.sources",
    "/etc/apt/keyrings/nvidia-cuda.asc",
    "/etc/apt/preferences.d/nvidia-driver-pin.pref",
    "/etc/modprobe.d/blacklist-nouveau.conf",
    "/etc/systemd/system/nvidia-persistenced.service.d",
])
def test_nothing_of_the_roles_configuration_is_there(existing, path):
    assert not existing.file(path).exists


def test_no_apt_source_pin_or_module_setting_mentions_nvidia(existing):
    # rc 1: nothing found; 2: a directory is missing (/etc/modprobe.d without kmod)
    r = existing.run("grep -rlis nvidia /etc/apt/sources.list.d /etc/apt/preferences.d /etc/modprobe.d")
    assert r.rc in (1, 2) and r.stdout == "", r.stdout


@pytest.mark.parametrize("package", ["dkms", "cuda-drivers-580", "libcuda1", "nvidia-smi", "python3-debian"])
def test_nothing_was_installed(existing, package):
    assert not existing.package(package).is_installed
