"""The nvidia_gpu role's decision (plugins/filter/nvidia_driver.py): host kind, the kernel module's
version, leave / install / userspace / fail and the reboot step, each failure naming what to change."""
from __future__ import annotations

import pytest

from plugins.filter import nvidia_driver as f

MIN = "580.65.06"
METAL = {"kind": "metal", "virt": "none", "detected": True}
VM = {"kind": "vm", "virt": "kvm", "detected": True}
LXC = {"kind": "container", "virt": "lxc", "detected": True}

PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 09:23:45 UTC 2025\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1)\n")
OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01  Release Build  "
        "(dvs-builder@U22-I3-AF03-09-1)  Thu Nov 20 2025\nGCC version:  gcc version 12.2.0\n")


def plan(host, kernel="", smi=(), upgrade=False, branch="580"):
    return f.nvidia_gpu_plan(host, kernel_driver=kernel, smi_drivers=list(smi), min_driver=MIN,
                             branch=branch, upgrade=upgrade)


@pytest.mark.parametrize("text, version", [
    (PROPRIETARY, "580.95.05"),
    (OPEN, "590.48.01"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48  Mon Jan  5 2026\n", "590.48"),
    ("", ""),
    ("GCC version: 12.2.0\n", ""),
])
def test_proc_version_gives_the_kernel_modules_version(text, version):
    assert f.nvidia_proc_driver_version(text) == version


@pytest.mark.parametrize("args, kind, virt", [
    (("auto", 0, "lxc\n", 1, "none\n"), "container", "lxc"),
    (("auto", 0, "podman\n", 1, "none\n"), "container", "podman"),
    (("auto", 1, "none\n", 0, "kvm\n"), "vm", "kvm"),
    (("auto", 1, "none\n", 1, "none\n"), "metal", "none"),
    (("auto", 2, "", 2, ""), "unknown", "systemd-detect-virt gave no answer (rc 2/2: no output)"),
    (("container",), "container", "set by nvidia_gpu_host_kind"),
])
def test_host_kind_from_systemd_detect_virt_or_the_variable(args, kind, virt):
    got = f.nvidia_host_kind(*args)
    assert (got["kind"], got["virt"]) == (kind, virt)


def test_a_working_newer_driver_on_metal_is_left_alone_and_the_branch_pin_goes():
    p = plan(METAL, "590.48.01", ["590.48.01"])
    assert p["action"] == "leave" and p["error"] == "" and p["unpin"] is True
    assert p["driver_match"] == r"^590\.48\.01$"
    assert p["driver_expect"] == "590.48.01 (left alone: >= nvidia_gpu_min_driver_version 580.65.06)"


def test_a_working_driver_on_the_pinned_branch_is_left_alone_with_its_pin():
    p = plan(VM, "580.95.05", ["580.95.05", "580.95.05"])
    assert p["action"] == "leave" and p["unpin"] is False


@pytest.mark.parametrize("kernel, smi, why", [
    ("", [], "no NVIDIA kernel module is loaded (/proc/driver/nvidia/version shows none)"),
    ("570.172.08", ["570.172.08"], "the loaded driver 570.172.08 is below the minimum "
                                   "nvidia_gpu_min_driver_version = 580.65.06"),
])
def test_metal_without_a_good_driver_installs_the_pinned_branch(kernel, smi, why):
    p = plan(METAL, kernel, smi)
    assert p["action"] == "install" and p["driver_match"] == r"^580\." and p["driver_expect"] == "580.x"
    assert p["reason"] == why + ": installing branch 580 (nvidia_gpu_driver_branch)"


def test_an_upgrade_asked_for_installs_even_over_a_working_driver():
    p = plan(METAL, "580.65.06", ["580.65.06"], upgrade=True)
    assert p["action"] == "install" and p["reason"].startswith("nvidia_gpu_upgrade is true")


@pytest.mark.parametrize("host, kernel, error", [
    (METAL, "590.48.01",
     "nvidia_gpu_upgrade is true but the loaded driver 590.48.01 is on a newer branch than "
     "nvidia_gpu_driver_branch = 580: installing that branch would downgrade it. Set "
     "nvidia_gpu_driver_branch: \"590\" to upgrade within its branch, or nvidia_gpu_upgrade: false to "
     "leave it alone."),
    (LXC, "570.172.08",
     "a container (lxc) whose hypervisor host runs NVIDIA driver 570.172.08, below the minimum "
     "nvidia_gpu_min_driver_version = 580.65.06: upgrade the driver on the hypervisor host (a "
     "container cannot change its kernel module), then run again."),
])
def test_an_upgrade_asked_for_where_none_may_happen_fails(host, kernel, error):
    p = plan(host, kernel, [kernel], upgrade=True)
    assert p["action"] == "fail" and p["error"] == error


def test_a_module_whose_user_space_differs_fails_asking_for_a_reboot():
    p = plan(METAL, "580.95.05", [])
    assert p["action"] == "fail"
    assert "the loaded kernel module is 580.95.05 (>= 580.65.06) but nvidia-smi gives no answer" in p["error"]
    assert "Reboot the host" in p["error"] and "nvidia_gpu_upgrade: true" in p["error"]
    assert "nvidia-smi reports driver 575.64" in plan(METAL, "580.95.05", ["575.64"])["error"]


def test_a_container_with_matching_user_space_is_left_alone():
    p = plan(LXC, "580.95.05", ["580.95.05"])
    assert p["action"] == "leave" and p["unpin"] is False
    assert p["driver_match"] == r"^580\.95\.05$" and p["driver_expect"] == "580.95.05 (the hypervisor host's)"


@pytest.mark.parametrize("smi", [[], ["575.64.05"]])
@pytest.mark.parametrize("upgrade", [False, True])
def test_a_container_gets_user_space_of_the_hosts_exact_version(smi, upgrade):
    p = plan(LXC, "590.48.01", smi, upgrade=upgrade)
    assert p["action"] == "userspace" and p["userspace_version"] == "590.48.01"
    assert p["driver_match"] == r"^590\.48\.01$"
    assert "no DKMS, no kernel module, no reboot" in p["reason"]


def test_a_container_without_a_host_driver_fails():
    p = plan(LXC)
    assert p["action"] == "fail"
    assert p["error"].startswith("a container (lxc) with no NVIDIA kernel module visible "
                                 "(/proc/driver/nvidia/version shows none): the driver belongs to the "
                                 "hypervisor host.")


def test_an_unknown_host_kind_asks_for_the_variable():
    p = plan(f.nvidia_host_kind("auto", 2, "", 2, ""), "580.95.05", ["580.95.05"])
    assert p["action"] == "fail" and "Set nvidia_gpu_host_kind to metal, vm or container." in p["error"]


@pytest.mark.parametrize("var, kw", [("nvidia_gpu_min_driver_version", {"min_driver": "580.x"}),
                                     ("nvidia_gpu_driver_branch", {"branch": ""})])
def test_bad_versions_name_the_variable(var, kw):
    args = {"kernel_driver": "580.95.05", "smi_drivers": ["580.95.05"], "min_driver": MIN, "branch": "580"}
    args.update(kw)
    assert f.nvidia_gpu_plan(METAL, **args)["error"].startswith(var + " = ")


def test_reboot_only_after_an_install_that_needs_one():
    left = plan(METAL, "580.65.06", ["580.65.06"])
    assert f.nvidia_gpu_reboot_step(left, False, True, "580")["needed"] is False
    assert f.nvidia_gpu_reboot_step(plan(LXC, "590.48.01"), True, True, "580")["reboot"] is False
    installed = plan(METAL, "580.65.06", ["580.65.06"], upgrade=True)
    assert f.nvidia_gpu_reboot_step(installed, False, True, "580") == {"reboot": False, "needed": False,
                                                                        "error": ""}
    assert f.nvidia_gpu_reboot_step(installed, True, True, "580") == {"reboot": True, "needed": True,
                                                                       "error": ""}
    assert f.nvidia_gpu_reboot_step(plan(METAL), False, True, "580")["reboot"] is True


@pytest.mark.parametrize("p, changed, why", [
    (plan(METAL), True, "the driver packages of branch 580 changed"),
    (plan(METAL), False, "no NVIDIA kernel module is loaded yet"),
    (plan(METAL, "570.172.08", ["570.172.08"]), False,
     "the loaded kernel module is 570.172.08, not branch 580"),
])
def test_a_needed_reboot_that_is_not_allowed_fails_naming_the_variable(p, changed, why):
    step = f.nvidia_gpu_reboot_step(p, changed, False, "580")
    assert step["reboot"] is False and step["needed"] is True
    assert step["error"] == (
        "a reboot is needed (%s) and nvidia_gpu_reboot is false. Reboot the host when it suits (the "
        "initramfs is rebuilt), then run again; or set nvidia_gpu_reboot: true to let the role reboot "
        "it." % why)
