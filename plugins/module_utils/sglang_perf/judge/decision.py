# -*- coding: utf-8 -*-
"""What the gate does after a benchmark: the verdict and the action, with the reason and the
messages. The one place this is decided (the sglang_gate_decide module and the sglang_gate
filters call it; the role's task files act on the action's value, never on the wording, and
assemble no message)."""
from __future__ import annotations

# The verdict words: a case's and a plan's (verdict.py: pass, fail or inconclusive) and
# the gate's (decide: pass, fail, or not judged in check mode). VERDICTS: what a gate run records.
PASS, FAIL, INCONCLUSIVE_VERDICT, NOT_JUDGED = "pass", "fail", "inconclusive", "not judged"
VERDICTS = (PASS, FAIL, INCONCLUSIVE_VERDICT)
RECORD, RESTORE, STOP, NOTHING = "record", "restore", "stop", "nothing"
NO_LKG_POLICIES = ("stop", "keep")
HOST, DEPLOYMENT = "host", "deployment"


def decide(result, unit_sha256, env_sha256, lkg=None, check_mode=False, node_rank=0,
           multinode=False, rollback=True, no_lkg="stop", rank0_result=None, missing=(), topology=None,
           host="?", profile="?"):
    """The gate's verdict, action and message.

    result: the host's plan result (``passed``), or None when there is none (the deploy failed
        before the gate).
    topology / rank0_result / missing: the deploy plan's topology, given: it says node_rank and
        multinode, and the result judged is judged()'s (a follower is judged by rank 0's result;
        rank 0 fails when a node of its deployment did not reach the gate). Without it, ``result``
        is judged as it is.
    unit_sha256, env_sha256: the deployed unit and environment file.
    lkg: None without a last-known-good, else {"unit_sha256", "env_sha256"} of it.
    node_rank / multinode: a multi-node deployment is restored as a whole, by the play.
    no_lkg: what a failure without a last-known-good does to the failing server: "stop" (stop and
        disable it: it is not trusted to serve, nor to start at boot) or "keep" (leave it running).
    Returns {"verdict", "action", "scope", "reason", "write_history", "result" (what was judged),
    "message" (a failed gate's, without what was restored: failure() adds it; else "")}."""
    if topology is not None:  # the deploy plan's topology: this node's result is judged() here
        node_rank, multinode = topology.get("node_rank") or 0, bool(topology.get("enabled"))
        result = judged(result, node_rank, topology, rank0_result, missing)
    out = {"scope": DEPLOYMENT if multinode else HOST, "result": result, "message": "",
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
    out["message"] = gate_message(out, host, profile, topology)
    return out


def judged(result, node_rank=0, topology=None, rank0_result=None, missing=()):
    """The result a node's gate is judged on. A follower of a multi-node deployment (node_rank > 0;
    only rank 0 serves the API) takes rank 0's result, or a failure naming rank 0 when rank 0
    gave none; rank 0 fails when a node of its deployment did not reach the gate (``missing``)."""
    topo = topology or {}
    if int(node_rank or 0) > 0:
        if isinstance(rank0_result, dict) and "msg" in rank0_result:
            return rank0_result
        return {"passed": False, "msg": "rank 0 (%s) of multi-node deployment %s failed before its gate"
                                        % (topo.get("rank0"), topo.get("group"))}
    if missing and topo.get("enabled"):
        out = dict(result or {})
        out.update(passed=False, msg="node %s of multi-node deployment %s failed before the gate; %s"
                   % (", ".join(missing), topo.get("group"), (result or {}).get("msg", "")))
        return out
    return result


def where(topology):
    """Which node of which deployment a message is about ('' for a single-node server)."""
    topo = topology or {}
    if not topo.get("enabled"):
        return ""
    if int(topo.get("node_rank") or 0) == 0:
        return " (rank 0 of multi-node deployment %s)" % topo.get("group")
    return " (node rank %s of multi-node deployment %s, judged by rank 0 %s)" % (
        topo.get("node_rank"), topo.get("group"), topo.get("rank0"))


def gate_message(decision, host, profile, topology=None):
    """The failed gate's message without what was restored (failure() adds it)."""
    msg = (decision.get("result") or {}).get("msg") or "no result"
    return "Gate failed on %s%s for profile %s: %s. %s" % (host, where(topology), profile, msg,
                                                            decision["reason"].capitalize())


def failure(decision, restored_text=None):
    """The failed gate's message, with the last-known-good run it restored (restored_text())."""
    ready = " (%s); the server is ready again" % restored_text if restored_text else ""
    return "%s%s." % (decision["message"], ready)


def restored_text(record):
    """What a message says was restored, from the last-known-good record (history.record())."""
    if record.get("adopted") is not None:
        return "the hand-made unit %s, adopted at %s and imported as the first last-known-good" % (
            record["adopted"], record.get("time"))
    figures = ""
    if isinstance(record.get("decode_tok_s"), dict):
        figures = " with %s tok/s, accept length %s" % (round(float(record["decode_tok_s"]["median"]), 1),
                                                         round(float(record.get("accept_len") or 0), 2))
    return "profile %s, passed at %s%s" % (record.get("profile"), record.get("time"), figures)


def rescue_failure(failure_msg, failed_task, gate_decided, multinode, restored=None, reason=None):
    """A failed deploy's message (playbooks/deploy.yml's rescue): the original failure, and where
    it failed and what was done when the gate had not decided."""
    if gate_decided:
        return failure_msg
    if multinode:  # outcome() rolls the deployment back as a whole and says so
        return "%s [deploy failed at '%s']" % (failure_msg, failed_task)
    done = ("restored the last-known-good unit (%s); the server is ready again" % restored) if restored \
        else reason
    return "%s [deploy failed at '%s'; %s]" % (failure_msg, failed_task, done)


def outcome_failure(deploy_failure, topology=None, restored=None):
    """Why the rollout fails this host: its own failure, else its multi-node deployment's, with
    the deployment's rollback."""
    topo = topology or {}
    msg = (deploy_failure or "A node of multi-node deployment %s failed." % topo.get("group")).strip()
    if topo.get("enabled") and restored:
        msg += (" The multi-node deployment %s was rolled back to its last-known-good units (%s); the "
                "server is ready again." % (topo.get("group"), restored))
    return msg


def outcome(verdict, deployment_failed=False, check_mode=False, deploy_failed=False):
    """The rollout summary's word for a host's gate: passed, FAILED, check mode or not reached."""
    if verdict == PASS and not deployment_failed:
        return "passed"
    if verdict in (PASS, FAIL):
        return "FAILED"
    if check_mode and not deploy_failed:
        return "check mode"
    return "not reached"


def lkg_problem(host, lkg_dir, service, missing, record, unit_size):
    """Why the last-known-good in ``lkg_dir`` cannot be restored ('' when it can): a file (or the
    release's interpreter) ``missing``, a record that is not the JSON a passing gate writes, or an
    empty unit. Checked before anything is touched."""
    if missing:
        what = "missing " + ", ".join(missing)
    elif not isinstance(record, dict) or "profile" not in record or not unit_size:
        what = ("corrupt (%s.json is not the JSON record a passing gate writes, or the unit is empty)"
                % service)
    else:
        return ""
    return ("Cannot roll back on %s: the last-known-good in %s is %s; nothing was changed: the installed "
            "unit stays as it is" % (host, lkg_dir, what))
