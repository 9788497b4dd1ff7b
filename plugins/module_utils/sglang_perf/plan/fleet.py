# -*- coding: utf-8 -*-
"""Fleets: the multi-node topology of a host and the rollout's batches.

``sglang_topology`` turns the inventory into what one host of a multi-node SGLang deployment needs
(``--nnodes``, ``--node-rank``, ``--dist-init-addr``) and every reason the group is inconsistent;
``sglang_rollout_serial`` / ``sglang_rollout_batches`` compute the rolling deploy's batches exactly
as Ansible will (``serial`` with ``pct_to_int``), so the preflight can refuse a rollout that would
split a multi-node deployment across batches before any host changes. plugins/filter/sglang_fleet.py
and the deploy plan (deploy_plan.py) call these.
"""
from __future__ import annotations

import re

class FleetError(ValueError):
    """Rollout settings the batches cannot be made from (Ansible shows it as the filter's error)."""

# Variables every node of one deployment must agree on (when the inventory sets them per host).
MUST_AGREE = ("sglang_profile", "sglang_version", "sglang_dist_init_port", "sglang_served_model_name",
              "sglang_model_name")


def _get(hostvars, host, key, default=None):
    try:
        vars_ = hostvars[host]
    except KeyError:
        return default
    try:
        return vars_[key] if key in vars_ else default
    except Exception:  # noqa: BLE001 - an undefined value behind a template
        return default


def _is_rank(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def sglang_topology(group, groups, hostvars, me, play_hosts=None, port=20000):
    """This host's multi-node deployment. ``group``: the inventory group forming it ('' or None:
    a single-node server). Ranks: each host's ``sglang_node_rank`` if the inventory sets it on
    every host of the group, else the group's inventory order. Rank 0's address: its
    ``sglang_node_address``, else its default IPv4 address (facts), else its ``ansible_host``."""
    single = {"enabled": False, "group": "", "nnodes": 1, "node_rank": 0, "rank0": me, "hosts": [me],
              "dist_init_addr": None, "errors": []}
    if not group:
        return single
    errors = []
    if not isinstance(group, str) or group not in groups:
        single["errors"] = ["sglang_multinode_group: %r is not an inventory group (groups: %s)"
                            % (group, ", ".join(sorted(g for g in groups if g not in ("all", "ungrouped"))))]
        return single
    members = list(groups[group])
    where = "multi-node deployment %s (hosts %s)" % (group, ", ".join(members))
    if me not in members:
        errors.append("%s: sglang_multinode_group is %s but %s is not in that group" % (me, group, me))
    if len(members) < 2:
        errors.append("%s: a multi-node deployment needs at least 2 hosts; unset "
                      "sglang_multinode_group for a single-node server" % where)
    explicit = {h: _get(hostvars, h, "sglang_node_rank") for h in members}
    set_on = [h for h in members if explicit[h] is not None]
    if set_on and len(set_on) != len(members):
        errors.append("%s: sglang_node_rank is set on %s but not on %s: set it on every host of the "
                      "group, or on none (ranks then follow the inventory order)"
                      % (where, ", ".join(set_on), ", ".join(h for h in members if h not in set_on)))
        ranks = dict((h, i) for i, h in enumerate(members))
    elif set_on:
        ranks = explicit
        bad = ["%s=%r" % (h, r) for h, r in ranks.items() if not _is_rank(r)]
        if bad:
            errors.append("%s: sglang_node_rank must be an integer >= 0, got %s" % (where, ", ".join(bad)))
        else:
            by_rank = {}
            for h in members:
                by_rank.setdefault(ranks[h], []).append(h)
            for rank, hosts in sorted(by_rank.items()):
                if len(hosts) > 1:
                    errors.append("%s: duplicate node rank %d on %s" % (where, rank, ", ".join(hosts)))
            if 0 not in by_rank:
                errors.append("%s: no host has node rank 0 (ranks: %s); rank 0 hosts the rendezvous "
                              "and serves the API"
                              % (where, ", ".join("%s=%s" % (h, ranks[h]) for h in members)))
            expected = list(range(len(members)))
            if sorted(by_rank) != expected and not errors:
                errors.append("%s: node ranks must be 0..%d, got %s"
                              % (where, len(members) - 1, ", ".join(str(r) for r in sorted(by_rank))))
    else:
        ranks = dict((h, i) for i, h in enumerate(members))
    for key in MUST_AGREE:
        seen = {}
        for h in members:
            value = _get(hostvars, h, key)
            if value is not None:
                seen.setdefault(repr(value), []).append(h)
        if len(seen) > 1:
            errors.append("%s: the nodes disagree on %s (%s); every node runs the same server"
                          % (where, key, "; ".join("%s on %s" % (v, ", ".join(hs))
                                                   for v, hs in seen.items())))
    if play_hosts is not None:
        missing = [h for h in members if h not in play_hosts]
        if missing:
            errors.append("%s: %s not in this run (--limit?); a multi-node deployment is deployed "
                          "as a whole"
                          % (where, ", ".join(missing) + (" is" if len(missing) == 1 else " are")))
    order = sorted(members, key=lambda h: (ranks[h] if _is_rank(ranks[h]) else 1 << 30, members.index(h)))
    rank0 = order[0]
    address = _get(hostvars, rank0, "sglang_node_address") or \
        (_get(hostvars, rank0, "ansible_default_ipv4") or {}).get("address") or \
        _get(hostvars, rank0, "ansible_host")
    if not address:
        errors.append("%s: cannot tell rank 0's address: set sglang_node_address for %s" % (where, rank0))
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        errors.append("sglang_dist_init_port must be a TCP port from 1 to 65535, got %r" % (port,))
    host_part = "[%s]" % address if address and ":" in str(address) else address
    return {
        "enabled": True,
        "group": group,
        "nnodes": len(members),
        "node_rank": ranks.get(me, 0) if _is_rank(ranks.get(me)) else 0,
        "rank0": rank0,
        "hosts": order,
        "dist_init_addr": "%s:%s" % (host_part, port) if address else None,
        "errors": errors,
    }


_BATCH = re.compile(r"^([1-9][0-9]*)%$")


def sglang_rollout_errors(canary, batch):
    """Problems of the rollout settings ([] = valid)."""
    errors = []
    if isinstance(canary, bool) or not isinstance(canary, int) or canary < 0:
        if not (isinstance(canary, str) and canary.isdigit()):
            errors.append("sglang_rollout_canary must be a number of hosts >= 0 (0: no canary), got %r"
                          % (canary,))
    ok = False
    if isinstance(batch, int) and not isinstance(batch, bool):
        ok = batch >= 1
    elif isinstance(batch, str):
        m = _BATCH.match(batch.strip())
        ok = batch.strip().isdigit() and int(batch) >= 1 or bool(m and int(m.group(1)) <= 100)
    if not ok:
        errors.append("sglang_rollout_batch must be a number of hosts >= 1 or a percentage such as "
                      "25%% (1%%-100%%), got %r" % (batch,))
    return errors


def sglang_rollout_serial(canary, batch):
    """The play's ``serial``: [canary, batch] (or [batch] without a canary)."""
    problems = sglang_rollout_errors(canary, batch)
    if problems:
        raise FleetError("; ".join(problems))
    batch = batch.strip() if isinstance(batch, str) else batch
    if isinstance(batch, str) and batch.isdigit():
        batch = int(batch)
    return ([int(canary)] if int(canary) > 0 else []) + [batch]


def _pct_to_int(value, total):
    """ansible.utils.helpers.pct_to_int (min_value 1)."""
    if isinstance(value, str) and value.endswith("%"):
        return int((int(value[:-1]) / 100.0) * total) or 1
    return int(value)


def sglang_rollout_batches(hosts, serial):
    """The batches Ansible's PlaybookExecutor._get_serialized_batches makes of ``hosts``."""
    hosts = list(hosts)
    total = len(hosts)
    serial = list(serial) or [-1]
    batches, item = [], 0
    while hosts:
        size = _pct_to_int(serial[item], total)
        if size <= 0:
            batches.append(hosts)
            break
        batches.append(hosts[:size])
        hosts = hosts[size:]
        item = min(item + 1, len(serial) - 1)
    return batches


def sglang_split_deployments(topologies, batches):
    """Problems: multi-node deployments whose hosts fall into more than one batch."""
    where = {}
    for i, batch in enumerate(batches):
        for h in batch:
            where[h] = i + 1
    problems, seen = [], set()
    for topo in topologies:
        if not topo.get("enabled") or topo["group"] in seen:
            continue
        seen.add(topo["group"])
        numbers = sorted(set(where[h] for h in topo["hosts"] if h in where))
        if len(numbers) > 1:
            problems.append("multi-node deployment %s (hosts %s) would be split across rollout batches %s: "
                            "its nodes start and roll back together, so they must be in one batch (put the "
                            "group first and set sglang_rollout_canary to %d, or raise sglang_rollout_batch)"
                            % (topo["group"], ", ".join(topo["hosts"]), " and ".join(str(n) for n in numbers),
                               len(topo["hosts"])))
    return problems
