# -*- coding: utf-8 -*-
"""What the gate does after a benchmark: the verdict and the action, with the reason. The one
place this is decided (the sglang_gate_decide module calls it; the role's task files act on the
action's value, never on the reason's wording)."""
from __future__ import annotations

PASS, FAIL, NOT_JUDGED = "pass", "fail", "not judged"
RECORD, RESTORE, NOTHING = "record", "restore", "nothing"
HOST, DEPLOYMENT = "host", "deployment"


def decide(result, unit_sha256, env_sha256, lkg=None, check_mode=False, node_rank=0,
           multinode=False, rollback=True):
    """The gate's verdict and action.

    result: the plan result (``passed``), or None when there is none (the deploy failed before
        the gate, or rank 0 of a multi-node deployment gave none).
    unit_sha256, env_sha256: the deployed unit and environment file.
    lkg: None without a last-known-good, else {"unit_sha256", "env_sha256"} of it.
    node_rank / multinode: a multi-node deployment is restored as a whole, by the play.
    Returns {"verdict", "action", "scope", "reason", "write_history"}."""
    out = {"scope": DEPLOYMENT if multinode else HOST,
           "write_history": int(node_rank or 0) == 0 and not check_mode}
    if check_mode:
        out.update(verdict=NOT_JUDGED, action=NOTHING, write_history=False,
                   reason="check mode: the benchmark did not run; nothing recorded or restored")
        return out
    if result is not None and result.get("passed") is True:
        out.update(verdict=PASS, action=RECORD, reason="recorded as last-known-good")
        return out
    out["verdict"] = FAIL
    if not rollback:
        out.update(action=NOTHING, reason="rollback disabled (sglang_gate_rollback: false)")
    elif lkg is None:
        out.update(action=NOTHING, reason="no last-known-good unit yet: service left as deployed")
    elif lkg.get("unit_sha256") == unit_sha256 and lkg.get("env_sha256") == env_sha256:
        out.update(action=NOTHING,
                   reason="the failing unit is the last-known-good one: nothing to restore")
    elif multinode:
        out.update(action=RESTORE, reason="the whole multi-node deployment is rolled back to its "
                                          "last-known-good units")
    else:
        out.update(action=RESTORE, reason="rolled back to the last-known-good unit")
    return out
