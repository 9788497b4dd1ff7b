#!/usr/bin/python
# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_check
short_description: Judge whether a model directory holds complete safetensors weights
description:
  - Checks a Hugging Face model directory (a C(hf download --local-dir) target, a cache snapshot
    C(.../snapshots/<commit>/) whose files are symlinks into C(blobs/), or a hand-copied tree).
  - C(config.json) must be a JSON object. With C(model.safetensors.index.json), every shard its
    C(weight_map) names must exist, be exactly as long as its own safetensors header says
    (8 bytes of header length N, N bytes of JSON header, then the tensor data up to the largest
    C(data_offsets) end), and hold every tensor the index maps to it. Without an index,
    C(model.safetensors) is checked the same way.
  - Reads file headers only (a few MB at most), never the tensor data. Changes nothing.
version_added: "1.0.0"
author: "sglang-deploy maintainers"
options:
  path:
    description: The model directory.
    type: path
    required: true
  revision:
    description:
      - The revision the model should be at. When it is a full commit sha and the directory
        records its commit (the C(hf download --local-dir) metadata under C(.cache/huggingface/download/),
        or a cache snapshot directory named after its commit), a different commit is a problem.
        A branch or tag name cannot be checked offline and is accepted.
    type: str
  readable_by:
    description:
      - User who must be able to read the directory and every model file (the service user).
        Checked by a child process running with that user's uid and groups, so modes, ACLs and
        every directory on the way count. Needs root unless it is the module's own user.
    type: str
  hidden_paths:
    description:
      - Directories the service cannot see (the unit's C(ProtectHome=yes) hides C(/home),
        C(/root) and C(/run/user)). A model file that resolves under one of them is a problem.
    type: list
    elements: path
    default: []
  max_problems:
    description: At most this many problems are listed (the count is always complete).
    type: int
    default: 20
  block:
    description:
      - A DFLASH drafter's block, the tokens one verify takes (the profile's
        C(speculative_num_draft_tokens) on SGLang, C(num_speculative_tokens) + 1 on vLLM). When
        C(config.json) names the block the drafter was trained for (C(dflash_config.block_size),
        else C(block_size), as SGLang's C(parse_dflash_draft_config) reads it) and it differs, the
        module warns naming both (RV(block_note)); both engines run the profile's block (SGLang
        resizes the drafter with its warning "DFLASH block size mismatch"; vLLM never reads the
        trained block), at an acceptance the drafter was not trained for, which the gate measures.
        Judged when the files are complete (an incomplete drafter's config.json may be the one
        the download replaces).
    type: int
  block_of:
    description: What drafts O(block), named in that failure (e.g. C(the profile dflash)).
    type: str
    default: the profile
attributes:
  check_mode:
    support: full
    details: Read-only; the same check in check mode.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Judge the model directory
  sglang_model_check:
    path: /srv/models/Qwen3.6-27B
    revision: main
    readable_by: sglang
    hidden_paths: [/home, /root, /run/user]
  register: model
  failed_when: false

- name: Refuse an incomplete model
  ansible.builtin.assert:
    that: model.complete
    fail_msg: "{{ model.path }}: {{ model.problems[:5] | join('; ') }}"
"""

RETURN = r"""
complete:
  description: The model is complete (no problems).
  returned: always
  type: bool
path:
  description: The directory checked.
  returned: always
  type: str
problems:
  description: What is wrong, one short sentence each, at most O(max_problems).
  returned: always
  type: list
  elements: str
  sample: ["model-00002-of-00002.safetensors is 1.20 GB of 4.90 GB (truncated)"]
problem_count:
  description: How many problems there are in all.
  returned: always
  type: int
layout:
  description: C(sharded) (an index), C(single) (model.safetensors), or C(none) (no weights found).
  returned: always
  type: str
shards:
  description: Weight files checked.
  returned: always
  type: int
size_bytes:
  description: Bytes of the weight files as found on disk.
  returned: always
  type: int
commit:
  description: The commit the directory records (null when it records none, or several).
  returned: always
  type: str
trained_block:
  description: The block a DFLASH drafter's C(config.json) says it was trained for (null when it says none).
  returned: always
  type: int
block_note:
  description:
    - The warning when O(block) differs from RV(trained_block) (null when they agree or either is
      unknown).
  returned: always
  type: str
"""

import json
import os
import struct

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_perf.plan import drafter
from ansible.module_utils.sglang_perf.host import weights

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
# safetensors refuses headers above 100 MB; a real one is a few hundred KB.
MAX_HEADER = 100 * 1000 * 1000


def size_text(n):
    if n < 1000:
        return "%d B" % n
    for unit, div in (("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        if n < div * 1000 or unit == "TB":
            return "%.2f %s" % (n / div, unit)


def read_header(path):
    """(tensor name -> [begin, end], expected file size) from a safetensors file's header, or
    raise ValueError with what is wrong."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("is %s: no safetensors header (truncated)" % size_text(size))
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER:
            raise ValueError("is not a safetensors file (header length %d)" % n)
        raw = f.read(n)
    if len(raw) < n:
        raise ValueError("is %s, shorter than its %s header (truncated)" % (size_text(size), size_text(n)))
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise ValueError("has a header that is not JSON")
    if not isinstance(header, dict):
        raise ValueError("has a header that is not a JSON object")
    offsets, end = {}, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        span = info.get("data_offsets") if isinstance(info, dict) else None
        if (not isinstance(span, list) or len(span) != 2 or not all(isinstance(x, int) for x in span)
                or not 0 <= span[0] <= span[1]):
            raise ValueError("has tensor %s without valid data_offsets" % name)
        offsets[name] = span
        end = max(end, span[1])
    return offsets, 8 + n + end


def check_weights(path, rel, wanted, problems):
    """Check one weight file; ``wanted`` are the tensor names the index maps to it (None: any).
    Returns its size on disk (0 when missing)."""
    full = os.path.join(path, rel)
    if not os.path.isfile(full):
        problems.append("missing %s" % rel + (" (a broken symlink)" if os.path.islink(full) else ""))
        return 0
    size = os.path.getsize(full)
    try:
        offsets, expected = read_header(full)
    except ValueError as e:
        problems.append("%s %s" % (rel, e))
        return size
    except OSError as e:
        problems.append("%s cannot be read: %s" % (rel, e.strerror or e))
        return size
    if size < expected:
        problems.append("%s is %s of %s (truncated)" % (rel, size_text(size), size_text(expected)))
    elif size > expected:
        problems.append("%s is %s, %d bytes more than its header accounts for"
                        % (rel, size_text(size), size - expected))
    if wanted is not None:
        absent = [t for t in wanted if t not in offsets]
        if len(absent) == 1:
            problems.append("tensor %s not in %s" % (absent[0], rel))
        elif absent:
            problems.append("%d tensors the index maps to %s are not in it (first: %s)"
                            % (len(absent), rel, absent[0]))
    return size


def read_json(path, rel, problems):
    full = os.path.join(path, rel)
    if not os.path.isfile(full):
        problems.append("missing %s" % rel)
        return None
    try:
        with open(full, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (ValueError, OSError):
        problems.append("%s is not valid JSON" % rel)
        return None
    if not isinstance(data, dict):
        problems.append("%s is not a JSON object" % rel)
        return None
    return data


def safe_relative(name):
    return (isinstance(name, str) and name != "" and not os.path.isabs(name)
            and ".." not in name.split("/"))


def unreadable_by(user, paths):
    """Paths (and the directory, first) that ``user`` cannot open, from a child running as them."""
    import grp
    import pwd
    pw = pwd.getpwnam(user)
    if os.geteuid() == pw.pw_uid:
        return [p for p in paths if not _can_open(p)]
    if os.geteuid() != 0:
        raise PermissionError("the module runs as uid %d, not root: cannot check %s's access"
                              % (os.geteuid(), user))
    groups = [g.gr_gid for g in grp.getgrall() if user in g.gr_mem]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to the user, try every path, write the failures, exit
        try:
            os.close(r)
            os.setgroups(sorted(set(groups + [pw.pw_gid])))
            os.setgid(pw.pw_gid)
            os.setuid(pw.pw_uid)
            out = json.dumps([p for p in paths if not _can_open(p)]).encode("utf-8")
            while out:
                out = out[os.write(w, out):]
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks).decode("utf-8"))


def _can_open(p):
    try:
        if os.path.isdir(p):
            os.listdir(p)
        else:
            with open(p, "rb") as f:
                f.read(1)
        return True
    except OSError:
        return False


def under(path, dirs):
    for d in dirs:
        d = d.rstrip("/") or "/"
        if path == d or path.startswith(d + "/") or d == "/":
            return d
    return None


def check(path, revision=None, readable_by=None, hidden_paths=()):
    """Everything wrong with the model directory ``path``: (problems, facts)."""
    facts = dict(layout="none", shards=0, size_bytes=0, commit=None, trained_block=None)
    if not os.path.isdir(path):
        return ["no such directory"], facts
    problems = []
    facts["trained_block"] = drafter.trained_block(read_json(path, "config.json", problems))
    files = ["config.json"]
    if os.path.exists(os.path.join(path, INDEX)):
        facts["layout"] = "sharded"
        files.append(INDEX)
        index = read_json(path, INDEX, problems)
        weight_map = index.get("weight_map") if index is not None else None
        if index is not None and (not isinstance(weight_map, dict) or not weight_map):
            problems.append("%s has no weight_map" % INDEX)
        by_shard = {}
        for tensor, shard in (weight_map or {}).items():
            by_shard.setdefault(shard, []).append(tensor)
        for shard in sorted(by_shard, key=str):
            if not safe_relative(shard):
                problems.append("%s maps tensor %s to %r, not a file in the directory"
                                % (INDEX, by_shard[shard][0], shard))
                continue
            files.append(shard)
            facts["size_bytes"] += check_weights(path, shard, by_shard[shard], problems)
        facts["shards"] = len(files) - 2
    elif os.path.exists(os.path.join(path, SINGLE)) or os.path.islink(os.path.join(path, SINGLE)):
        facts["layout"] = "single"
        files.append(SINGLE)
        facts["size_bytes"] = check_weights(path, SINGLE, None, problems)
        facts["shards"] = 1
    else:
        problems.append("no weights: neither %s nor %s" % (INDEX, SINGLE))

    commits = weights.recorded_commits(path)
    if len(commits) == 1:
        facts["commit"] = next(iter(commits))
    if revision and weights.COMMIT_RE.match(revision) and commits and commits != {revision}:
        problems.append("the files are at commit %s, the revision asked for is %s"
                        % (", ".join(sorted(commits)), revision))

    existing = [os.path.join(path, f) for f in files if os.path.exists(os.path.join(path, f))]
    for p in [path] + existing:
        real = os.path.realpath(p)
        hidden = under(real, hidden_paths)
        if hidden:
            shown = os.path.relpath(p, path) if p != path else "the directory"
            where = "is" if real == os.path.abspath(p) else "resolves to %s," % real
            problems.append("%s %s under %s, which the service cannot see" % (shown, where, hidden))
            break
    if readable_by:
        try:
            denied = unreadable_by(readable_by, [path] + existing)
        except KeyError:
            problems.append("user %s does not exist" % readable_by)
        except PermissionError as e:
            problems.append(str(e))
        else:
            if denied:
                first = os.path.relpath(denied[0], path) if denied[0] != path else "the directory"
                problems.append("%s cannot read %s%s" % (readable_by, first, " and %d more" % (
                    len(denied) - 1) if len(denied) > 1 else ""))
    return problems, facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            revision=dict(type="str"),
            readable_by=dict(type="str"),
            hidden_paths=dict(type="list", elements="path", default=[]),
            max_problems=dict(type="int", default=20),
            block=dict(type="int"),
            block_of=dict(type="str", default="the profile"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    problems, facts = check(p["path"], p["revision"], p["readable_by"], p["hidden_paths"])
    # judged on complete files only: an incomplete drafter is refused or downloaded first
    note = None if problems else drafter.block_note(p["path"], facts["trained_block"], p["block"],
                                                    p["block_of"])
    if note:
        module.warn(note[0].upper() + note[1:])
    module.exit_json(changed=False, path=p["path"], complete=not problems, block_note=note,
                     problems=problems[:max(p["max_problems"], 1)], problem_count=len(problems), **facts)


if __name__ == "__main__":
    main()
