#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gate_decide
short_description: Decide what a gate run does (record, restore, nothing) and write its history
description:
  - Reads the checksums of the deployed unit and environment file and of the last-known-good
    copies, and returns the gate's verdict and action from one function
    (C(plugins/module_utils/sglang_perf/judge/decision.py)); task files act on RV(action), never on
    the wording of RV(reason).
  - Builds the history record of the run (C(plugins/module_utils/sglang_perf/record/history.py), the
    module that also reads it) and appends it, as one JSON line, to O(history_path) when given
    and this node is rank 0. The history is never truncated or rewritten.
  - With O(textfile_path), rank 0 also writes the run's figures in Prometheus' text format for
    node_exporter's textfile collector (C(plugins/module_utils/sglang_perf/record/exposition.py)),
    replacing the file atomically. A textfile that cannot be written is a warning and
    RV(textfile_error), never a failure - the history line and the decision stand.
  - On action C(record) (not in check mode) keeps the deployed unit and environment in O(lkg_dir)
    as last-known-good (the directory C(0750) root:O(history_group), the files C(0644) root), with
    the run's record beside them as C(<service_name>.json).
version_added: "1.1.0"
author: "sglang-deploy maintainers"
options:
  result:
    description: The plan result of the sglang_bench module; omit it when the deploy failed before
      the gate (the verdict is then a failure).
    type: dict
  unit_path:
    description: The deployed systemd unit.
    type: path
    required: true
  env_path:
    description: The deployed environment file.
    type: path
    required: true
  lkg_dir:
    description: Directory of the last-known-good C(<service_name>.service) and C(.env).
    type: path
    required: true
  service_name:
    description: The unit's name without C(.service).
    type: str
    required: true
  rollback:
    description: Whether a failed gate restores the last-known-good unit.
    type: bool
    default: true
  no_lkg:
    description: What a failure without a last-known-good does to the failing server - C(stop)
      (stop and disable it) or C(keep) (leave it running).
    type: str
    choices: [stop, keep]
    default: stop
  node_rank:
    description: This node's rank in a multi-node deployment (only rank 0 writes the history).
    type: int
    default: 0
  multinode:
    description: Whether this host is a node of a multi-node deployment (restored as a whole by the play).
    type: bool
    default: false
  topology:
    description:
      - The host's multi-node topology from the deploy plan (C(enabled), C(group), C(node_rank),
        C(rank0)); when given it says O(node_rank) and O(multinode), and the messages name the node.
    type: dict
  rank0_result:
    description:
      - For a follower of a multi-node deployment, rank 0's plan result - the follower is judged by
        it (only rank 0 serves the API); omitted when rank 0 gave none (a failure naming rank 0).
    type: dict
  missing_nodes:
    description: For rank 0, the nodes of its deployment that did not reach the gate (rank 0 then fails).
    type: list
    elements: str
    default: []
  history_path:
    description: The host's gate history (JSON lines); the record is appended when given.
    type: path
  history_owner:
    description: Owner of a newly created history file.
    type: str
  history_group:
    description: Group of a newly created history file.
    type: str
  history_mode:
    description: Mode of a newly created history file.
    type: str
    default: "0640"
  textfile_path:
    description:
      - The Prometheus textfile of the last run (an absolute path ending in C(.prom), in
        node_exporter's textfile directory), replaced by every recorded run with mode C(0644) by a
        rename of a temporary C(.<name>.<random>.tmp) in the same directory. Empty - none.
      - Written after the history line, only when the run is recorded (rank 0, not check mode).
        A failure to write it is reported as a warning and RV(textfile_error); the module still
        returns the decision.
    type: str
    default: ""
  context:
    description: What the record says about the run besides the result (host, profile,
      sglang_version, multinode, max_regression_pct).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    details: In check mode the verdict is C(not judged), the action C(nothing), and no history or
      textfile is written; RV(textfile_content) says what the textfile would hold.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Decide what the gate does
  sglang_gate_decide:
    result: "{{ __sglang_gate_result }}"
    unit_path: /etc/systemd/system/sglang.service
    env_path: /etc/sglang/sglang.env
    lkg_dir: /var/lib/sglang/last-known-good
    service_name: sglang
    history_path: /var/lib/sglang/gate-history.jsonl
    context: {host: "{{ inventory_hostname }}", profile: nextn_3step, sglang_version: "0.5.23"}
  register: decision

- name: Restore the last-known-good unit
  ansible.builtin.include_tasks: restore.yml
  when: decision.action == 'restore'
"""

RETURN = r"""
verdict:
  description: C(pass), C(fail) or C(not judged) (check mode).
  returned: always
  type: str
action:
  description: C(record) (keep the deployed unit as last-known-good), C(restore) (put the
    last-known-good back), C(stop) (no last-known-good and O(no_lkg=stop) - stop and disable the
    failing server) or C(nothing).
  returned: always
  type: str
scope:
  description: C(host), or C(deployment) for a node of a multi-node deployment (the play restores
    all its nodes together).
  returned: always
  type: str
reason:
  description: Why, in words (for messages and the history).
  returned: always
  type: str
result:
  description: The result the gate judged (rank 0's for a follower; failed for rank 0 when a node did
    not reach the gate).
  returned: always
  type: dict
message:
  description: A failed gate's message without what was restored (the C(sglang_gate_failure) filter
    adds it); empty otherwise.
  returned: always
  type: str
record:
  description: The history record of the run.
  returned: always
  type: dict
lkg_exists:
  description: Whether a last-known-good unit exists.
  returned: always
  type: bool
lkg_written:
  description: Whether a passing gate's unit, environment and record (C(<service>.json)) changed
    in O(lkg_dir) (action C(record), not in check mode).
  returned: always
  type: bool
history_written:
  description: Whether the record was appended to O(history_path).
  returned: always
  type: bool
textfile_written:
  description: The path of the Prometheus textfile written, empty when none was.
  returned: always
  type: str
textfile_content:
  description: The Prometheus text of the record, written (or in check mode not written) to
    O(textfile_path).
  returned: when O(textfile_path) is set, this node is rank 0 and the record could be rendered
  type: str
textfile_error:
  description: Why O(textfile_path) was not written (also a warning); the history and the decision
    are not affected.
  returned: when writing O(textfile_path) failed
  type: str
"""

import datetime
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf.judge import decision
from ansible.module_utils.sglang_perf.record import exposition, history


def _sha(module, path):
    return module.sha256(path) if path and os.path.isfile(path) else None


def _textfile(module, path, rec, write):
    """The textfile's part of the result; written when ``write``. Any failure, rendering included,
    is a warning: the history line is appended and the decision must reach the play."""
    out = {}
    try:
        out["textfile_content"] = exposition.render(rec)
        if write:
            problems = exposition.path_problems(path)
            if problems:
                raise ValueError("; ".join(problems))
            exposition.write(path, out["textfile_content"])
            out["textfile_written"] = path
    except Exception as e:
        out["textfile_error"] = ("cannot write the gate's Prometheus textfile %s "
                                 "(sglang_gate_textfile_path): %s; the history and the decision are "
                                 "not affected" % (path, e))
        module.warn(out["textfile_error"])
    return out


def _write(module, path, data, mode, group=None):
    """``data`` (bytes) at ``path`` (replaced atomically when it differs), root-owned; whether it changed."""
    changed = not (os.path.isfile(path) and open(path, "rb").read() == data)
    if changed:
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        module.atomic_move(tmp, path)
    changed = module.set_mode_if_different(path, mode, changed)
    changed = module.set_owner_if_different(path, "root", changed)
    return module.set_group_if_different(path, group or "root", changed)


def _record_lkg(module, p, rec):
    """A passing gate's unit and environment kept as last-known-good in lkg_dir, with the run's
    record beside them (<service>.json); whether anything changed."""
    d, base = p["lkg_dir"], os.path.join(p["lkg_dir"], p["service_name"])
    changed = not os.path.isdir(d)
    os.makedirs(d, exist_ok=True)
    changed = module.set_mode_if_different(d, "0750", changed)
    changed = module.set_owner_if_different(d, "root", changed)
    changed = module.set_group_if_different(d, p["history_group"] or "root", changed)
    for src, dest in ((p["unit_path"], base + ".service"), (p["env_path"], base + ".env")):
        if os.path.isfile(src):
            with open(src, "rb") as fh:
                changed = _write(module, dest, fh.read(), "0644") or changed
        elif os.path.lexists(dest):  # none deployed: no older copy stays beside the new one
            os.remove(dest)
            changed = True
    text = json.dumps(rec, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"
    return _write(module, base + ".json", text.encode("utf-8"), "0644") or changed


def main():
    module = AnsibleModule(
        argument_spec=dict(
            result=dict(type="dict"),
            unit_path=dict(type="path", required=True),
            env_path=dict(type="path", required=True),
            lkg_dir=dict(type="path", required=True),
            service_name=dict(type="str", required=True),
            rollback=dict(type="bool", default=True),
            no_lkg=dict(type="str", choices=["stop", "keep"], default="stop"),
            node_rank=dict(type="int", default=0),
            multinode=dict(type="bool", default=False),
            topology=dict(type="dict"),
            rank0_result=dict(type="dict"),
            missing_nodes=dict(type="list", elements="str", default=[]),
            history_path=dict(type="path"),
            history_owner=dict(type="str"),
            history_group=dict(type="str"),
            history_mode=dict(type="str", default="0640"),
            textfile_path=dict(type="str", default=""),
            context=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    unit, env = _sha(module, p["unit_path"]), _sha(module, p["env_path"])
    base = os.path.join(p["lkg_dir"], p["service_name"])
    lkg_unit = _sha(module, base + ".service")
    lkg = None if lkg_unit is None else {"unit_sha256": lkg_unit, "env_sha256": _sha(module, base + ".env")}
    context = dict(p["context"])
    d = decision.decide(p["result"], unit, env, lkg, check_mode=module.check_mode,
                        node_rank=p["node_rank"], multinode=p["multinode"], rollback=p["rollback"],
                        no_lkg=p["no_lkg"], rank0_result=p["rank0_result"], missing=p["missing_nodes"],
                        topology=p["topology"], host=context.get("host", "?"),
                        profile=context.get("profile", "?"))
    context.setdefault("time", datetime.datetime.utcnow().replace(microsecond=0).isoformat() + "Z")
    context.update(unit_sha256=unit, env_sha256=env)
    rec = history.record(d["result"], d, context)
    written = False
    if p["history_path"] and d["write_history"]:
        path = p["history_path"]
        existed = os.path.exists(path)
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
        except OSError as e:
            module.fail_json(msg="cannot append to the gate history %s: %s" % (path, e), **d)
        if not existed:
            module.set_mode_if_different(path, p["history_mode"], False)
            if p["history_owner"]:
                module.set_owner_if_different(path, p["history_owner"], False)
            if p["history_group"]:
                module.set_group_if_different(path, p["history_group"], False)
        written = True
    textfile = {"textfile_written": ""}
    if p["textfile_path"] and int(p["node_rank"] or 0) == 0:
        textfile.update(_textfile(module, p["textfile_path"], rec, d["write_history"]))
    lkg_written = d["action"] == "record" and not module.check_mode and _record_lkg(module, p, rec)
    module.exit_json(changed=written or bool(textfile["textfile_written"]) or lkg_written, record=rec,
                     lkg_exists=lkg is not None, history_written=written, lkg_written=lkg_written,
                     **textfile, **d)


if __name__ == "__main__":
    main()
