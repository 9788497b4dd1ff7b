# -*- coding: utf-8 -*-
"""A profile's drafter as an artifact, named as the target model is (docs/profiles-and-engines.md,
Drafters). A profile of sglang_profiles whose algorithm loads a drafter of its own (SGLang DFLASH
or EAGLE3, vLLM dflash or eagle3) says::

    draft_model:
      repo: z-lab/Qwen3.6-27B-DFlash   # the Hugging Face repository
      revision: main                   # a branch, a tag or a commit sha (production: the sha)
      path: ""                         # '': <sglang_model_dir>/<the repository's name>
      params_b: 1.73                   # its weights, billions (the memory preflight)
      kv_bytes_per_token: 10240        # its cache per target token, all GPUs (the preflight)

``speculative_draft_model_path``, the engine setting, is derived from it here and never set by
hand. The role judges the drafter at that path with the target's model check (tasks/model.yml,
the plan's ``drafter``): one beside the target is downloaded there when incomplete, as the target
is (sglang_model_download); one named by ``path`` is loaded in place and refused when incomplete.
Standard library only."""
from __future__ import annotations

import re

from ..engines.settings import is_host_path, is_num, is_revision

SETTING = "speculative_draft_model_path"
DEFAULT_REVISION = "main"
KEYS = {
    "repo": "the Hugging Face repository (ORG/NAME)",
    "revision": "a branch, a tag or a commit sha",
    "path": "an absolute directory on the host loaded in place ('': beside the target)",
    "params_b": "its weights in billions of parameters",
    "kv_bytes_per_token": "its cache per target token in bytes, all GPUs together",
}
_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def load_path(draft, model_dir):
    """Where the engine loads the drafter from: its ``path``, else beside the target."""
    if draft.get("path"):
        return draft["path"]
    return "%s/%s" % (str(model_dir).rstrip("/"), str(draft.get("repo", "")).split("/")[-1])


def errors(p, var):
    """The problems of a profile's ``draft_model``, each naming its key. [] = none."""
    draft = p.get("draft_model")
    if draft is None:
        return []
    if not isinstance(draft, dict):
        return ["%s.draft_model must be a mapping of %s, got %r" % (var, ", ".join(KEYS), draft)]
    problems = ["%s.draft_model.%s: unknown key (known: %s)" % (var, k, ", ".join(KEYS))
                for k in sorted(set(draft) - set(KEYS))]
    repo = draft.get("repo")
    if not isinstance(repo, str) or not _REPO.match(repo):
        problems.append("%s.draft_model.repo must be a Hugging Face repository ORG/NAME, got %r"
                        % (var, repo))
    revision = draft.get("revision", DEFAULT_REVISION)
    if not is_revision(revision):
        problems.append("%s.draft_model.revision must be a branch, a tag or a commit sha, got %r"
                        % (var, revision))
    path = draft.get("path") or ""
    if path and not is_host_path(path):
        problems.append("%s.draft_model.path must be an absolute directory on the host without white "
                        "space, or '' (beside the target), got %r" % (var, path))
    if not is_num(draft.get("params_b")) or draft["params_b"] <= 0:
        problems.append("%s.draft_model.params_b must be %s (> 0), got %r"
                        % (var, KEYS["params_b"], draft.get("params_b")))
    if not is_num(draft.get("kv_bytes_per_token")) or draft["kv_bytes_per_token"] < 0:
        problems.append("%s.draft_model.kv_bytes_per_token must be %s (>= 0), got %r"
                        % (var, KEYS["kv_bytes_per_token"], draft.get("kv_bytes_per_token")))
    return problems


def place(profiles, model_dir, var="sglang_profiles"):
    """(``profiles`` with ``speculative_draft_model_path`` derived from each valid
    ``draft_model``, problems): a profile of ``profiles`` (flat, bases resolved) that sets the path
    by hand is refused by name; an invalid draft_model passes through for ``errors``."""
    if not isinstance(profiles, dict):
        return profiles, []
    out, problems = {}, []
    for name, p in profiles.items():
        if isinstance(p, dict) and p.get(SETTING) is not None:
            problems.append("%s.%s.%s is derived from draft_model (its path, else beside the "
                            "target): remove it, and name the drafter with draft_model {repo, "
                            "revision, params_b, kv_bytes_per_token} (path: a directory loaded in "
                            "place)" % (var, name, SETTING))
        draft = p.get("draft_model") if isinstance(p, dict) else None
        if isinstance(draft, dict) and p.get(SETTING) is None and not errors(p, name):
            p = dict(p)
            p[SETTING] = load_path(draft, model_dir)
        out[name] = p
    return out, problems


def artifact(profile, block=None):
    """What tasks/model.yml judges of a flat, placed profile's drafter: {repo, revision, path,
    download, block} (download: it lives beside the target, so the role may fetch it; a ``path``
    of the profile's own is loaded in place; block: a DFLASH drafter's block size, the tokens one
    verify takes - its config.json must say the same: SGLang keeps the profile's without a word
    and the drafter drafts what it was trained for); None when the profile loads none."""
    draft = profile.get("draft_model") if isinstance(profile, dict) else None
    if not isinstance(draft, dict) or not profile.get(SETTING):
        return None
    dflash = str(profile.get("speculative_algorithm") or "").upper() == "DFLASH"
    return {"repo": draft["repo"], "revision": draft.get("revision") or DEFAULT_REVISION,
            "path": profile[SETTING], "download": not draft.get("path"), "block": block if dflash else None}


def trained_block(config):
    """The block a DFLASH drafter was trained for, from its config.json's mapping, as SGLang 0.5.23's
    parse_dflash_draft_config reads it (speculative/dflash_utils.py): dflash_config's block_size,
    else a top-level block_size, through int() (a string of digits counts); None when it says none
    or says one SGLang refuses at start (not a number, below 1)."""
    if not isinstance(config, dict):
        return None
    inner = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) else {}
    raw = inner.get("block_size", config.get("block_size"))
    try:
        block = int(raw)
    except (TypeError, ValueError):
        return None
    return block if block >= 1 else None


def block_note(path, trained, block, setting="this setting"):
    """What happens when ``setting`` (named in the sentence) drafts a DFLASH block of ``block``
    tokens with the drafter at ``path`` trained for ``trained`` (trained_block); None when they
    agree or either is unknown. Both engines run it at the setting's block: SGLang 0.5.23 logs
    "DFLASH block size mismatch" and resizes the drafter to it (dflash_worker_v2.py
    set_block_size); vLLM 0.33 drafts num_speculative_tokens + 1 and never reads the trained block.
    The drafter was trained at the other size, so its acceptance there is the gate's to measure:
    the role's model check warns with this sentence, the tuner launches such blocks and notes it."""
    sizes = [int(b) for b in (block if isinstance(block, (list, tuple, set)) else [block]) if b is not None]
    if trained is None or not sizes or sizes == [int(trained)]:
        return None
    shown = ", ".join(str(b) for b in sorted(sizes))
    return ("the drafter at %s was trained for a block of %d tokens (its config.json) and %s drafts %s: "
            "SGLang resizes the drafter to it (its warning 'DFLASH block size mismatch'), vLLM drafts "
            "num_speculative_tokens + 1 without reading it; the acceptance at %s is measured, not "
            "assumed" % (path, int(trained), setting, shown, shown))
