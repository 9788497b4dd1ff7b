#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_units
short_description: Find, adopt and give back hand-made systemd units that launch a model server
description:
  - O(state=found) (read-only) lists the systemd units under O(unit_dirs) whose effective
    C(ExecStart=) (the unit file, then its C(.d/*.conf) drop-ins) launches SGLang or vLLM
    (C(python -m sglang.launch_server), C(sglang serve), C(vllm serve), C(python -m
    vllm.entrypoints.openai.api_server), or C(python -m) one of O(launch_modules)) and that are enabled
    or running. The managed unit O(service) is never listed.
  - O(state=adopted) does the same, then copies each found unit file (and its drop-in
    directory) into a new dated directory under O(backup_dir) with a C(manifest.json) saying
    whether each was enabled and running, and stops and disables them. The unit files stay
    where they are, disabled.
  - O(state=restored) gives the units of the backup O(backup) (a directory name under
    O(backup_dir); default the newest) back. It stops and disables O(service), puts each unit
    file back, and enables and starts each unit as the manifest says it was.
  - O(state=imported) makes the unit O(import_unit) of the newest backup holding it the first
    last-known-good of O(service) in O(lkg_dir) (C(<service>.service), an empty C(.env) and a
    C(.json) record), unless a last-known-good exists already. A failing first gate then has
    something to restore.
version_added: "1.2.0"
author: "sglang-deploy maintainers"
options:
  state:
    description: What to do.
    type: str
    choices: [found, adopted, restored, imported]
    default: found
  service:
    description: The managed unit's name without C(.service); never found, adopted or restored.
    type: str
    required: true
  launch_modules:
    description:
      - Python modules the managed unit may run, each mapped to its engine (C(sglang_launch_modules)
        inverted).
    type: dict
  unit_dirs:
    description: Directories holding unit files, in systemd's order of precedence.
    type: list
    elements: path
    default: [/etc/systemd/system, /run/systemd/system, /usr/lib/systemd/system, /lib/systemd/system]
  backup_dir:
    description: Where the dated adoption backups are kept (O(state=adopted), O(state=restored),
      O(state=imported)).
    type: path
  backup:
    description: The backup (a directory name under O(backup_dir)) to restore; default the newest.
    type: str
  import_unit:
    description: The adopted unit to import as last-known-good (O(state=imported)), with or
      without C(.service).
    type: str
  lkg_dir:
    description: The gate's last-known-good directory (O(state=imported)).
    type: path
attributes:
  check_mode:
    support: full
    details: Reports what it would adopt, restore or import.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Find hand-made units that launch SGLang or vLLM
  sglang_units:
    service: sglang
  register: existing

- name: Stop and disable them, with a dated backup
  sglang_units:
    state: adopted
    service: sglang
    backup_dir: /var/lib/sglang/adopted
"""

RETURN = r"""
units:
  description: The units found (O(state=found), O(state=adopted)) or restored.
  returned: always
  type: list
  elements: dict
  contains:
    name: {description: Unit name with C(.service), type: str}
    path: {description: The unit file, type: str}
    argv: {description: The effective ExecStart command line, as words, type: list}
    engine: {description: C(sglang) or C(vllm), type: str}
    args_from: {description: Index in the argv of the engine's first argument, type: int}
    enabled: {description: Whether it starts at boot (C(systemctl is-enabled) says enabled), type: bool}
    active: {description: Whether it runs now, type: bool}
backup:
  description: The backup directory written (O(state=adopted)) or read (O(state=restored), O(state=imported)).
  returned: when a backup was written or read
  type: str
imported:
  description: Whether a last-known-good was written (O(state=imported)).
  returned: always
  type: bool
"""

import datetime
import glob
import json
import os
import shlex
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf.host.launchers import engine_of

EXEC_PREFIXES = "-@:+!"
MANIFEST_KEYS = ("name", "path", "argv", "engine", "args_from", "enabled", "active")


def unit_lines(text):
    """(section, key, value) of a unit file, with continuation lines joined and comments dropped."""
    out, section, pending = [], None, ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if pending:
            line = pending + " " + line.lstrip()
            pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        key, eq, value = stripped.partition("=")
        if eq:
            out.append((section, key.strip(), value.strip()))
    return out


def exec_start(texts):
    """The effective ExecStart= argv of a unit file and its drop-ins (in order; an empty
    ExecStart= resets the list), or None. The first command of a list is the server's."""
    commands = []
    for text in texts:
        for section, key, value in unit_lines(text):
            if section == "Service" and key == "ExecStart":
                if not value:
                    commands = []
                else:
                    commands.append(value)
    if not commands:
        return None
    value = commands[0].lstrip(EXEC_PREFIXES)
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def candidates(unit_dirs, service):
    """{unit name: (unit file, [drop-in files])}: the first directory holding a name wins."""
    managed = service if service.endswith(".service") else service + ".service"
    seen = {}
    for d in unit_dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.service"))):
            name = os.path.basename(path)
            if name == managed or name in seen or os.path.islink(path) and not os.path.exists(path):
                continue
            dropins = []
            for dd in unit_dirs:
                dropins += glob.glob(os.path.join(dd, name + ".d", "*.conf"))
            seen[name] = (path, sorted(dropins, key=os.path.basename))
    return seen


def systemctl(module, *args):
    rc, out, err = module.run_command(["systemctl"] + list(args))
    return rc, out.strip()


def find(module, unit_dirs, service, launch_modules):
    units = []
    for name, (path, dropins) in sorted(candidates(unit_dirs, service).items()):
        texts = [_read(path) or ""] + [_read(p) or "" for p in dropins]
        argv = exec_start(texts)
        engine, args_from = engine_of(argv or [], launch_modules)
        if not engine:
            continue
        enabled = systemctl(module, "is-enabled", name)[1] in ("enabled", "enabled-runtime", "alias")
        active = systemctl(module, "is-active", name)[1] in ("active", "activating", "reloading")
        if enabled or active:
            units.append({"name": name, "path": path, "dropins": dropins, "argv": argv,
                          "engine": engine, "args_from": args_from, "enabled": enabled, "active": active})
    return units


def _stamp():
    return datetime.datetime.utcnow().strftime("%Y%m%dT%H%M%SZ")


def backups(backup_dir):
    """The backup directories under ``backup_dir`` that hold a manifest, oldest first."""
    if not backup_dir or not os.path.isdir(backup_dir):
        return []
    return sorted(d for d in os.listdir(backup_dir)
                  if os.path.isfile(os.path.join(backup_dir, d, "manifest.json")))


def adopt(module, units, backup_dir):
    stamp = _stamp()
    target = os.path.join(backup_dir, stamp)
    n = 1
    while os.path.exists(target):
        n += 1
        target = os.path.join(backup_dir, "%s-%d" % (stamp, n))
    if module.check_mode:
        return target
    os.makedirs(target, mode=0o750)
    for u in units:
        shutil.copy2(u["path"], os.path.join(target, u["name"]))
        if u["dropins"]:
            dd = os.path.join(target, u["name"] + ".d")
            os.makedirs(dd, exist_ok=True)
            for p in u["dropins"]:
                shutil.copy2(p, os.path.join(dd, os.path.basename(p)))
    manifest = {"time": datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z",
                "units": [{k: u[k] for k in MANIFEST_KEYS} for u in units]}
    with open(os.path.join(target, "manifest.json"), "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")
    for u in units:
        for args in (("stop", u["name"]), ("disable", u["name"])):
            rc, out = systemctl(module, *args)
            if rc != 0:
                module.fail_json(msg="systemctl %s %s failed: %s (the backup is in %s)"
                                 % (args[0], u["name"], out, target), backup=target)
    return target


def _load(backup_dir, name):
    with open(os.path.join(backup_dir, name, "manifest.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _manifest(module, backup_dir, backup):
    names = backups(backup_dir)
    if not names:
        module.fail_json(msg="no adoption backup under %s: nothing was adopted on this host" % backup_dir)
    name = backup or names[-1]
    if name not in names:
        module.fail_json(msg="backup %r is not under %s (there: %s)" % (name, backup_dir, ", ".join(names)))
    return os.path.join(backup_dir, name), _load(backup_dir, name)


def restore(module, service, backup_dir, backup):
    path, manifest = _manifest(module, backup_dir, backup)
    units = manifest["units"]
    if module.check_mode:
        return path, units
    managed = service if service.endswith(".service") else service + ".service"
    systemctl(module, "stop", managed)
    systemctl(module, "disable", managed)
    for u in units:
        shutil.copy2(os.path.join(path, u["name"]), u["path"])
        dd = os.path.join(path, u["name"] + ".d")
        if os.path.isdir(dd):
            target = u["path"] + ".d"
            os.makedirs(target, exist_ok=True)
            for p in glob.glob(os.path.join(dd, "*.conf")):
                shutil.copy2(p, os.path.join(target, os.path.basename(p)))
    systemctl(module, "daemon-reload")
    for u in units:
        for wanted, args in ((u["enabled"], ("enable", u["name"])), (u["active"], ("start", u["name"]))):
            if wanted:
                rc, out = systemctl(module, *args)
                if rc != 0:
                    module.fail_json(msg="systemctl %s %s failed: %s" % (args[0], u["name"], out),
                                     backup=path)
    return path, units


def import_lkg(module, service, backup_dir, unit, lkg_dir):
    """Write the adopted ``unit`` as the first last-known-good; (backup, written)."""
    name = unit if unit.endswith(".service") else unit + ".service"
    base = os.path.join(lkg_dir, service)
    if os.path.exists(base + ".service"):
        return None, False
    manifests = [(b, _load(backup_dir, b)) for b in backups(backup_dir)]
    for b, manifest in reversed(manifests):
        entry = [u for u in manifest["units"] if u["name"] == name]
        if entry:
            path = os.path.join(backup_dir, b)
            break
    else:
        adopted = sorted({u["name"] for _, m in manifests for u in m["units"]})
        module.fail_json(msg="sglang_gate_lkg_import: %s is in no adoption backup under %s (adopted: %s)"
                         % (name, backup_dir, ", ".join(adopted) or "none"))
    if module.check_mode:
        return path, True
    os.makedirs(lkg_dir, mode=0o750, exist_ok=True)
    shutil.copy2(os.path.join(path, name), base + ".service")
    os.chmod(base + ".service", 0o644)
    with open(base + ".env", "w", encoding="utf-8") as fh:
        fh.write("# The adopted unit %s keeps its own environment settings.\n" % name)
    record = {"profile": "%s (adopted)" % name, "adopted": name, "time": manifest["time"],
              "argv": entry[0]["argv"], "engine": entry[0]["engine"], "backup": path,
              "reason": "the hand-made unit %s, imported as the first last-known-good" % name}
    with open(base + ".json", "w", encoding="utf-8") as fh:
        json.dump(record, fh, indent=2, sort_keys=True)
        fh.write("\n")
    return path, True


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["found", "adopted", "restored", "imported"], default="found"),
            service=dict(type="str", required=True),
            launch_modules=dict(type="dict"),
            unit_dirs=dict(type="list", elements="path",
                           default=["/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system",
                                    "/lib/systemd/system"]),
            backup_dir=dict(type="path"),
            backup=dict(type="str"),
            import_unit=dict(type="str"),
            lkg_dir=dict(type="path"),
        ),
        required_if=[("state", "adopted", ["backup_dir"]), ("state", "restored", ["backup_dir"]),
                     ("state", "imported", ["backup_dir", "import_unit", "lkg_dir"])],
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "restored":
        path, units = restore(module, p["service"], p["backup_dir"], p["backup"])
        module.exit_json(changed=True, units=units, backup=path, imported=False)
    if p["state"] == "imported":
        path, written = import_lkg(module, p["service"], p["backup_dir"], p["import_unit"], p["lkg_dir"])
        module.exit_json(changed=written, units=[], backup=path, imported=written)
    units = find(module, p["unit_dirs"], p["service"], p["launch_modules"])
    if p["state"] == "adopted" and units:
        path = adopt(module, units, p["backup_dir"])
        module.exit_json(changed=True, units=units, backup=path, imported=False)
    module.exit_json(changed=False, units=units, imported=False)


if __name__ == "__main__":
    main()
