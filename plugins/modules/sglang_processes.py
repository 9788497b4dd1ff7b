#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_processes
short_description: Find (and optionally stop) SGLang processes that systemd does not manage
description:
  - Finds processes that look like a model server - their command line runs one of O(launch_modules),
    SGLang or vLLM (C(plugins/module_utils/sglang_perf/host/launchers.py)), they listen on O(port), or
    C(nvidia-smi --query-compute-apps) lists them as GPU users - and
    that do not belong to the cgroup of O(service). These are the leftovers of hand launches
    (C(nohup), C(tmux), C(setsid)) that hold the port or the GPU memory a deploy needs.
  - With O(stop=true) it stops them (SIGTERM, then SIGKILL after O(stop_timeout)) and reports a
    change. Otherwise it only reports; the calling role decides whether to fail.
  - Reads C(/proc) only; Linux.
version_added: "1.0.0"
author: "sglang-deploy maintainers"
options:
  port:
    description: TCP port the server listens on.
    type: int
    required: true
  launch_modules:
    description:
      - Python modules a server process runs (C(python -m <module>)), each mapped to its engine
        (C(sglang) or C(vllm)); the role passes C(sglang_launch_modules) inverted. Engines' own
        launchers (C(sglang.launch_server), C(sglang serve), C(vllm serve) ...) are always recognised.
    type: dict
    default: {sglang.launch_server: sglang, vllm.entrypoints.cli.main: vllm}
  service:
    description: systemd unit whose processes are managed (name with or without C(.service)).
    type: str
    required: true
  stop:
    description: Stop the stray processes found.
    type: bool
    default: false
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL.
    type: int
    default: 30
  nvidia_smi:
    description: The C(nvidia-smi) to ask for GPU compute processes; skipped when not found.
    type: str
    default: nvidia-smi
attributes:
  check_mode:
    support: full
    details: Reports what it would stop.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Refuse to deploy beside a hand-launched server
  sglang_processes:
    port: 30000
    launch_modules: {sglang.launch_server: sglang}
    service: sglang
  register: strays
  failed_when: strays.strays | length > 0
"""

RETURN = r"""
strays:
  description: Processes found that systemd does not manage under O(service).
  returned: always
  type: list
  elements: dict
  contains:
    pid: {description: Process id, type: int}
    cmdline: {description: Command line, type: str}
    user: {description: Owner uid, type: int}
    reasons:
      description: "Why it matched: launch_module (one of O(launch_modules)), sglang or vllm (the command
        line), port, gpu"
      type: list
    unit:
      description: The systemd service it runs in (a hand-made unit), or null (nohup, tmux, a shell)
      type: str
    gpu_memory_mib: {description: GPU memory in use per nvidia-smi, type: int}
managed_pids:
  description: Matching processes that do belong to O(service).
  returned: always
  type: list
  elements: int
stopped:
  description: PIDs stopped (empty unless O(stop=true)).
  returned: always
  type: list
  elements: int
"""

import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf.host.launchers import MAIN_MODULES, engine_of


def _read(path, binary=False):
    try:
        with open(path, "rb" if binary else "r") as f:
            return f.read()
    except OSError:
        return None


def listening_inodes(port):
    """Socket inodes listening on TCP ``port`` (IPv4 and IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        text = _read(table) or ""
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) < 10:
                continue
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def socket_inodes(pid):
    out = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def gpu_processes(module, nvidia_smi):
    path = module.get_bin_path(nvidia_smi) if not os.path.isabs(nvidia_smi) else nvidia_smi
    if not path or not os.path.exists(path):
        return {}
    rc, out, err = module.run_command([path, "--query-compute-apps=pid,used_memory",
                                       "--format=csv,noheader,nounits"])
    if rc != 0:
        return {}
    apps = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            apps[int(parts[0])] = int(parts[1]) if parts[1].isdigit() else None
    return apps


def scan(module, port, launch_modules, service, nvidia_smi):
    unit = service if service.endswith(".service") else service + ".service"
    listen = listening_inodes(port)
    gpu = gpu_processes(module, nvidia_smi)
    me = os.getpid()
    ancestors = set()
    pid = me
    while pid > 1:
        ancestors.add(pid)
        stat = _read("/proc/%d/stat" % pid) or ""
        try:
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (IndexError, ValueError):
            break
    strays, managed = [], []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in ancestors:
            continue
        raw = _read("/proc/%d/cmdline" % pid, binary=True)
        if not raw:
            continue
        argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
        reasons = []
        engine, _ = engine_of(argv, launch_modules)
        if engine:
            reasons.append("launch_module" if set(launch_modules or ()) & set(argv) else engine)
        if listen and socket_inodes(pid) & listen:
            reasons.append("port")
        if pid in gpu:
            reasons.append("gpu")
        if not reasons:
            continue
        cgroup = _read("/proc/%d/cgroup" % pid) or ""
        if "/%s" % unit in cgroup:
            managed.append(pid)
            continue
        try:
            uid = os.stat("/proc/%d" % pid).st_uid
        except OSError:
            continue
        strays.append({"pid": pid, "cmdline": " ".join(argv), "user": uid, "reasons": reasons,
                       "gpu_memory_mib": gpu.get(pid), "unit": cgroup_unit(cgroup)})
    return strays, sorted(managed)


def cgroup_unit(cgroup):
    """The systemd service a process runs in (from /proc/PID/cgroup), or None (a session, nohup)."""
    for line in cgroup.splitlines():
        for part in reversed(line.rsplit(":", 1)[-1].split("/")):
            if part.endswith(".service") and not part.startswith("user@"):
                return part
    return None


def stop(pids, timeout):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if os.path.exists("/proc/%d" % p) and not _zombie(p)]
        if alive:
            time.sleep(0.2)
    for pid in alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return alive


def _zombie(pid):
    stat = _read("/proc/%d/stat" % pid) or ""
    try:
        return stat.rsplit(")", 1)[1].split()[0] == "Z"
    except IndexError:
        return False


def main():
    module = AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", required=True),
            launch_modules=dict(type="dict", default=dict(MAIN_MODULES)),
            service=dict(type="str", required=True),
            stop=dict(type="bool", default=False),
            stop_timeout=dict(type="int", default=30),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not 0 < p["port"] < 65536:
        module.fail_json(msg="port must be between 1 and 65535, got %d" % p["port"])
    strays, managed = scan(module, p["port"], p["launch_modules"], p["service"], p["nvidia_smi"])
    result = dict(changed=False, strays=strays, managed_pids=managed, stopped=[])
    if p["stop"] and strays:
        result["changed"] = True
        result["stopped"] = [s["pid"] for s in strays]
        if not module.check_mode:
            killed = stop(result["stopped"], p["stop_timeout"])
            result["killed"] = killed
            left, _ = scan(module, p["port"], p["launch_modules"], p["service"], p["nvidia_smi"])
            if left:
                module.fail_json(msg="stray SGLang processes still running after SIGTERM/SIGKILL: %s"
                                 % ", ".join("%d" % s["pid"] for s in left), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
