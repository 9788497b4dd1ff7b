# -*- coding: utf-8 -*-
"""What the gate does after a benchmark: the verdict and the action, with the reason. The one
place this is decided (the sglang_gate_decide module calls it; the role's task files act on the
action's value, never on the reason's wording)."""
from __future__ import annotations

# The verdict words: a case's and a plan's (engine.py, plan.py: pass, fail or inconclusive) and
# the gate's (decide: pass, fail, or not judged in check mode). VERDICTS: what a gate run records.
PASS, FAIL, INCONCLUSIVE_VERDICT, NOT_JUDGED = "pass", "fail", "inconclusive", "not judged"
VERDICTS = (PASS, FAIL, INCONCLUSIVE_VERDICT)
RECORD, RESTORE, STOP, NOTHING = "record", "restore", "stop", "nothing"
NO_LKG_POLICIES = ("stop", "keep")
HOST, DEPLOYMENT = "host", "deployment"


def decide(result, unit_sha256, env_sha256, lkg=None, check_mode=False, node_rank=0,
           multinode=False, rollback=True, no_lkg="stop"):
    """The gate's verdict and action.

    result: the plan result (``passed``), or None when there is none (the deploy failed before
        the gate, or rank 0 of a multi-node deployment gave none).
    unit_sha256, env_sha256: the deployed unit and environment file.
    lkg: None without a last-known-good, else {"unit_sha256", "env_sha256"} of it.
    node_rank / multinode: a multi-node deployment is restored as a whole, by the play.
    no_lkg: what a failure without a last-known-good does to the failing server: "stop" (stop and
        disable it: it is not trusted to serve, nor to start at boot) or "keep" (leave it running).
    Returns {"verdict", "action", "scope", "reason", "write_history"}."""
    out = {"scope": DEPLOYMENT if multinode else HOST,
           "write_history": int(node_rank or 0) == 0 and not check_mode}
    if no_lkg not in NO_LKG_POLICIES:
        raise ValueError("sglang_gate_no_lkg must be one of %s, got %r"
                         % (", ".join(NO_LKG_POLICIES), no_lkg))
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
    elif lkg is None and unit_sha256 is None:
        out.update(action=NOTHING, reason="no unit was installed: nothing to stop or restore")
    elif lkg is None and no_lkg == "stop":
        out.update(action=STOP, reason="no last-known-good unit to restore: the failing server was "
                                       "stopped and disabled (sglang_gate_no_lkg: stop)")
    elif lkg is None:
        out.update(action=NOTHING, reason="no last-known-good unit to restore: the failing server was "
                                          "left running (sglang_gate_no_lkg: keep)")
    elif lkg.get("unit_sha256") == unit_sha256 and lkg.get("env_sha256") == env_sha256:
        out.update(action=NOTHING,
                   reason="the failing unit is the last-known-good one: nothing to restore")
    elif multinode:
        out.update(action=RESTORE, reason="the whole multi-node deployment is rolled back to its "
                                          "last-known-good units")
    else:
        out.update(action=RESTORE, reason="rolled back to the last-known-good unit")
    return out
