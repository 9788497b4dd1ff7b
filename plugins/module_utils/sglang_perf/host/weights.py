# -*- coding: utf-8 -*-
"""The commit a model directory's files are at: what a revision such as ``main`` resolved to when
it was downloaded. ``hf download --local-dir`` writes one metadata file per downloaded file under
``.cache/huggingface/download/`` whose first line is the commit (huggingface_hub's
``_local_folder.py``); a cache snapshot directory (``.../snapshots/<commit>/``) is named after it.
A hand-copied tree records none. ``sglang_model_check`` judges a directory with it; the host's
fingerprint (fingerprint.py) records it for the model and the drafter, so a moving ``main`` is
named as a change of weights. Standard library only (it runs on the host, Python 3.9+)."""
from __future__ import annotations

import os
import re

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")


def recorded_commits(path):
    """The set of commits the directory ``path`` records (empty: none recorded)."""
    meta = os.path.join(path, ".cache", "huggingface", "download")
    commits = set()
    for root, _dirs, files in os.walk(meta):
        for name in files:
            if name.endswith(".metadata"):
                try:
                    with open(os.path.join(root, name)) as f:
                        line = f.readline().strip()
                except OSError:
                    continue
                if COMMIT_RE.match(line):
                    commits.add(line)
    if not commits:
        real = os.path.realpath(path)
        if COMMIT_RE.match(os.path.basename(real)) and os.path.basename(os.path.dirname(real)) == "snapshots":
            commits.add(os.path.basename(real))
    return commits


def resolved(artifact):
    """What the fingerprint records of an artifact {repo, revision, path} (None: no artifact): the
    same keys and ``commit``, the one commit its directory records, else the revision asked for
    when that is itself a commit, else None (a branch or tag whose files record no commit)."""
    if not isinstance(artifact, dict) or not artifact.get("path"):
        return None
    commits = recorded_commits(artifact["path"])
    asked = str(artifact.get("revision") or "")
    if len(commits) == 1:
        commit = next(iter(commits))
    else:
        commit = asked if COMMIT_RE.match(asked) else None
    return {"repo": artifact.get("repo"), "revision": asked or None, "path": artifact["path"],
            "commit": commit}
