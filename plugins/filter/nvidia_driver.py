# -*- coding: utf-8 -*-
"""Filters of the nvidia_gpu role: what kind of host this is, which NVIDIA kernel module it runs,
and what the role does about it (one decision, computed here and nowhere else)."""
from __future__ import annotations

import re

DOCUMENTATION = r"""
name: nvidia_gpu_plan
short_description: The nvidia_gpu role's decision - leave the driver, install it, or user space only
description:
  - nvidia_proc_driver_version parses /proc/driver/nvidia/version into the kernel module's version.
  - nvidia_host_kind turns systemd-detect-virt's answers (or nvidia_gpu_host_kind) into metal, vm or
    container.
  - nvidia_gpu_plan decides leave, install, userspace or fail, with the message of a failure.
  - nvidia_gpu_reboot_step decides whether to reboot, or to fail because a reboot is not allowed.
"""

HOST_KINDS = ("metal", "vm", "container")
# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 23 ..." (proprietary) or
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..." (open).
_NVRM = re.compile(r"^NVRM version:.*?\bKernel Module\b.*?\s(\d{3,}(?:\.\d+){1,2})(?:\s|$)", re.M)
_VERSION = re.compile(r"^\d+(?:\.\d+)*$")


def nvidia_proc_driver_version(text):
    """The kernel module's version from /proc/driver/nvidia/version, '' when none is shown."""
    m = _NVRM.search(text or "")
    return m.group(1) if m else ""


def _key(version):
    return tuple(int(p) for p in str(version).split("."))


def _branch(version):
    return str(version).split(".")[0]


def nvidia_host_kind(setting, container_rc=None, container_out="", vm_rc=None, vm_out=""):
    """{kind, virt, detected}: nvidia_gpu_host_kind when it is not auto, else systemd-detect-virt's
    answers (--container: rc 0 and the container's type; --vm: rc 0 and the hypervisor; both rc 1
    and 'none': bare metal). kind 'unknown' when neither answered (e.g. no systemd-detect-virt)."""
    if setting != "auto":
        return {"kind": setting, "virt": "set by nvidia_gpu_host_kind", "detected": False}
    container_out, vm_out = (container_out or "").strip(), (vm_out or "").strip()
    if container_rc == 0 and container_out not in ("", "none"):
        return {"kind": "container", "virt": container_out, "detected": True}
    if vm_rc == 0 and vm_out not in ("", "none"):
        return {"kind": "vm", "virt": vm_out, "detected": True}
    if container_rc == 1 and vm_rc == 1:
        return {"kind": "metal", "virt": "none", "detected": True}
    return {"kind": "unknown", "virt": "systemd-detect-virt gave no answer (rc %s/%s: %s)"
            % (container_rc, vm_rc, container_out or vm_out or "no output"), "detected": True}


def _plan(action, host, driver, reason, match, expect, **extra):
    plan = {"action": action, "host_kind": host["kind"], "virt": host["virt"], "driver": driver,
            "reason": reason, "error": "", "driver_match": match, "driver_expect": expect,
            "userspace_version": "", "unpin": False}
    plan.update(extra)
    return plan


def _fail(host, driver, error):
    return _plan("fail", host, driver, error, "", "", error=error)


def _exact(version):
    return "^%s$" % re.escape(version)


def nvidia_gpu_plan(host, kernel_driver="", smi_drivers=(), min_driver="", branch="", upgrade=False,
                    proc_file="/proc/driver/nvidia/version"):
    """What the role does on this host:

    - leave: a working driver (the kernel module's version, nvidia-smi answering with the same) at or
      above min_driver, and no upgrade asked (or a container): install nothing, pin nothing.
      unpin: the loaded driver is not on `branch`, so the role's branch pin must go (apt would move
      the driver to `branch` at the next upgrade).
    - install (bare metal or VM): no kernel module, one below min_driver, or nvidia_gpu_upgrade: the
      pinned branch with DKMS; verified against that branch.
    - userspace (container): the hypervisor host's kernel module is at or above min_driver but the
      container's user space does not match it: user-space libraries of exactly that version.
    - fail: error says why and what to change.
    """
    smi = sorted(set(d for d in smi_drivers or () if d))
    for var, value in (("nvidia_gpu_min_driver_version", min_driver), ("nvidia_gpu_driver_branch", branch)):
        if not _VERSION.match(str(value)):
            return _fail(host, kernel_driver, "%s = %r is not a driver version" % (var, value))
    if host["kind"] not in HOST_KINDS:
        return _fail(host, kernel_driver, "cannot tell whether this is bare metal, a VM or a container: "
                     "%s. Set nvidia_gpu_host_kind to metal, vm or container." % host["virt"])
    seen = ("nvidia-smi reports driver %s" % "/".join(smi)) if smi else "nvidia-smi gives no answer"
    working = bool(kernel_driver) and smi == [kernel_driver]
    at_min = bool(kernel_driver) and _key(kernel_driver) >= _key(min_driver)
    minimum = "the minimum nvidia_gpu_min_driver_version = %s" % min_driver
    if host["kind"] == "container":
        if not kernel_driver:
            return _fail(host, "", "a container (%s) with no NVIDIA kernel module visible (%s shows "
                         "none): the driver belongs to the hypervisor host. Load the NVIDIA driver there "
                         "and pass the GPUs' device nodes into the container; the role installs only the "
                         "user-space libraries matching it." % (host["virt"], proc_file))
        if not at_min:
            return _fail(host, kernel_driver, "a container (%s) whose hypervisor host runs NVIDIA driver %s, "
                         "below %s: upgrade the driver on the hypervisor host (a container cannot change "
                         "its kernel module), then run again." % (host["virt"], kernel_driver, minimum))
        if working:
            why = "a container (%s) on the hypervisor host's driver %s (>= %s) with matching user space" % (
                host["virt"], kernel_driver, min_driver)
            return _plan("leave", host, kernel_driver, why + ": nothing to install",
                         _exact(kernel_driver), "%s (the hypervisor host's)" % kernel_driver,
                         unpin=_branch(kernel_driver) != branch)
        why = "a container (%s) on the hypervisor host's driver %s; %s" % (host["virt"], kernel_driver, seen)
        return _plan("userspace", host, kernel_driver,
                     "%s: user-space libraries %s only (no DKMS, no kernel module, no reboot)"
                     % (why, kernel_driver),
                     _exact(kernel_driver), "%s (the hypervisor host's)" % kernel_driver,
                     userspace_version=kernel_driver)
    installed = "branch %s (nvidia_gpu_driver_branch)" % branch
    if upgrade and kernel_driver and _key(_branch(kernel_driver)) > _key(branch):
        return _fail(host, kernel_driver, "nvidia_gpu_upgrade is true but the loaded driver %s is on a newer "
                     "branch than nvidia_gpu_driver_branch = %s: installing that branch would downgrade it. "
                     "Set nvidia_gpu_driver_branch: \"%s\" to upgrade within its branch, or "
                     "nvidia_gpu_upgrade: false to leave it alone." % (kernel_driver, branch,
                                                                      _branch(kernel_driver)))
    if at_min and not upgrade:
        if working:
            return _plan("leave", host, kernel_driver, "driver %s is loaded and answers (>= %s): left alone "
                         "(nvidia_gpu_upgrade: true installs %s)" % (kernel_driver, min_driver, installed),
                         _exact(kernel_driver), "%s (left alone: >= nvidia_gpu_min_driver_version %s)"
                         % (kernel_driver, min_driver), unpin=_branch(kernel_driver) != branch)
        return _fail(host, kernel_driver, "the loaded kernel module is %s (>= %s) but %s: user space and "
                     "kernel module differ, usually driver packages changed without a reboot. Reboot the "
                     "host to load the installed driver, or set nvidia_gpu_upgrade: true to install %s "
                     "(and nvidia_gpu_reboot: true to let the role reboot)."
                     % (kernel_driver, min_driver, seen, installed))
    if upgrade:
        why = "nvidia_gpu_upgrade is true"
    elif kernel_driver:
        why = "the loaded driver %s is below %s" % (kernel_driver, minimum)
    else:
        why = "no NVIDIA kernel module is loaded (%s shows none)" % proc_file
    return _plan("install", host, kernel_driver, "%s: installing %s" % (why, installed),
                 "^%s\\." % re.escape(branch), "%s.x" % branch)


def nvidia_gpu_reboot_step(plan, driver_changed, allowed, branch):
    """{reboot, error}: after an install, reboot when the driver packages changed or the loaded
    kernel module is not the pinned branch's; when a reboot is needed and not allowed, error says so."""
    if plan.get("action") != "install":
        return {"reboot": False, "needed": False, "error": ""}
    loaded = plan.get("driver") or ""
    if driver_changed:
        why = "the driver packages of branch %s changed" % branch
    elif not loaded:
        why = "no NVIDIA kernel module is loaded yet"
    elif _branch(loaded) != str(branch):
        why = "the loaded kernel module is %s, not branch %s" % (loaded, branch)
    else:
        return {"reboot": False, "needed": False, "error": ""}
    if allowed:
        return {"reboot": True, "needed": True, "error": ""}
    return {"reboot": False, "needed": True,
            "error": "a reboot is needed (%s) and nvidia_gpu_reboot is false. Reboot the host when it suits "
                     "(the initramfs is rebuilt), then run again; or set nvidia_gpu_reboot: true to let "
                     "the role reboot it." % why}


class FilterModule(object):
    def filters(self):
        return {"nvidia_proc_driver_version": nvidia_proc_driver_version,
                "nvidia_host_kind": nvidia_host_kind,
                "nvidia_gpu_plan": nvidia_gpu_plan,
                "nvidia_gpu_reboot_step": nvidia_gpu_reboot_step}
