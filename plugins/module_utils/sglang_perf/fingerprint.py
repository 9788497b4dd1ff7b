# -*- coding: utf-8 -*-
"""The host's fingerprint, taken at the start of every gate run, and what changed between two.

The same software on the same GPUs runs at another speed when a power limit, a clock cap, a PCIe
link or the GPU topology changed; a comparison of two runs names those first ("GPU 1: power limit
300 W -> 250 W", "GPU 1: SM clock capped at 1,400 MHz"), then the figures.
``take(run, nvidia_smi, identity)`` asks nvidia-smi (per GPU: name, driver, power limits, max,
application and current clocks, the active clock-event reasons, PCIe generation and width,
persistence mode, ECC; ``nvidia-smi topo -m``'s GPU-to-GPU links) and adds ``identity`` (engine,
version, release, profile and the hash of its settings) and the weights: the model's and the
drafter's repository, the revision asked for and the commit their files are at (weights.py), so
a moving ``main`` is named; ``limits(gpu)`` says what holds a GPU's clocks down;
``differences(before, now)`` lists what changed, host first. Standard library only
(it runs on the host, Python 3.9+)."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess

from . import weights

# nvidia-smi --query-gpu field -> (key, label, unit), compared as they read. The PCIe generation is
# the link's maximum (an idle GPU's current generation drops to save power; a board or BIOS at a
# lower generation lowers the maximum); the width is the current one (a link trained at x8 instead
# of x16 stays so).
GPU_FIELDS = (
    ("index", "index", "index", ""),
    ("pci.bus_id", "bus_id", "PCI bus id", ""),
    ("name", "name", "GPU", ""),
    ("driver_version", "driver", "driver", ""),
    ("power.limit", "power_limit_w", "power limit", " W"),
    ("clocks.max.sm", "max_sm_clock_mhz", "max SM clock", " MHz"),
    ("clocks.max.memory", "max_memory_clock_mhz", "max memory clock", " MHz"),
    ("pcie.link.gen.max", "pcie_gen", "PCIe generation", ""),
    ("pcie.link.width.current", "pcie_width", "PCIe width", "x"),
    ("persistence_mode", "persistence_mode", "persistence mode", ""),
    ("ecc.mode.current", "ecc", "ECC", ""),
    ("power.default_limit", "default_power_limit_w", "default power limit", " W"),
)
# The clocks as they run, judged by limits() rather than compared as they read (a current clock
# moves with the load): field names, newest first -> key. The names are those `nvidia-smi
# --help-query-gpu` lists (driver 535; the same text as nvidia-smi(1)'s): there is no
# clocks.applications.sm, the SM domain's application clock is the graphics one; the clock-event
# reasons were clocks_throttle_reasons.* before driver 535, which knows both.
RUNNING_FIELDS = (
    (("enforced.power.limit",), "enforced_power_limit_w"),
    (("clocks.applications.graphics",), "app_sm_clock_mhz"),
    (("clocks.default_applications.graphics",), "default_app_sm_clock_mhz"),
    (("clocks.applications.memory",), "app_memory_clock_mhz"),
    (("clocks.default_applications.memory",), "default_app_memory_clock_mhz"),
    (("clocks.current.sm",), "sm_clock_mhz"),
    (("clocks.current.memory",), "memory_clock_mhz"),
    (("clocks_event_reasons.active", "clocks_throttle_reasons.active"), "clock_event_mask"),
)
# The clock-event reasons and their bits in the .active mask (nvml.h, nvmlClocksEventReasons:
# docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html); each is also a field of its
# own ("Active" / "Not Active"), read where the driver answers it, else taken from the mask.
REASONS = (("gpu_idle", 0x1), ("applications_clocks_setting", 0x2), ("sw_power_cap", 0x4),
           ("hw_slowdown", 0x8), ("sync_boost", 0x10), ("sw_thermal_slowdown", 0x20),
           ("hw_thermal_slowdown", 0x40), ("hw_power_brake_slowdown", 0x80))
REASON_FIELDS = tuple((("clocks_event_reasons." + r, "clocks_throttle_reasons." + r), "reason:" + r)
                      for r, _ in REASONS)
NUMERIC = {"index", "pcie_gen", "pcie_width"} | {
    k for k in [f[1] for f in GPU_FIELDS] + [f[1] for f in RUNNING_FIELDS] if k.endswith(("_w", "_mhz"))}
# Compared run to run (the bus id only matches GPUs up, a name or driver change is named).
COMPARED = tuple(f for f in GPU_FIELDS if f[1] not in ("index", "bus_id"))
# What the run's identity holds, compared in this order: key -> label.
IDENTITY = (("engine", "engine"), ("version", "engine version"), ("release", "release"),
            ("profile", "profile"), ("profile_sha256", "profile settings"))
# The weights the run serves, each {repo, revision, path} in the identity, recorded with its commit.
WEIGHTS = (("model", "model"), ("drafter", "drafter"))
NOT_AVAILABLE = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "")
# nvidia-smi on a wedged GPU can hang for minutes: the fingerprint gives up after this.
TIMEOUT_S = 30
# What nvidia-smi says (exiting non-zero) when its driver does not know a field.
_UNKNOWN_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def run_argv(argv, timeout=TIMEOUT_S):
    """``argv``'s (rc, stdout, stderr); raises OSError when it cannot start or outlives
    ``timeout`` seconds."""
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, text=True, check=False)
    except subprocess.TimeoutExpired as e:
        raise OSError("no answer in %d s" % timeout) from e
    return done.returncode, done.stdout, done.stderr


def settings_sha256(settings):
    """The first 12 hex digits of the sha256 of a profile's settings (sorted JSON): the same
    settings hash the same on every host and run, whatever the profile is called."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


def query_fields():
    """Every field the fingerprint asks, as [(names, key)]: each name the driver may know it by,
    the newest first."""
    return [((f[0],), f[1]) for f in GPU_FIELDS] + list(RUNNING_FIELDS) + list(REASON_FIELDS)


def query_argv(nvidia_smi, names=None):
    """nvidia-smi's argv for ``names`` (default: each field's newest name)."""
    names = names or [n[0] for n, _ in query_fields()]
    return [nvidia_smi, "--query-gpu=" + ",".join(names), "--format=csv,noheader,nounits"]


def topo_argv(nvidia_smi):
    return [nvidia_smi, "topo", "-m"]


def _value(key, text):
    text = text.strip()
    if text in NOT_AVAILABLE:
        return None
    if key.startswith("reason:"):
        return {"Active": True, "Not Active": False}.get(text)
    if key in NUMERIC:
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() else number
    return text


def _events(row):
    """The active clock-event reasons of one parsed row (its reason:* columns taken out), in
    REASONS' order: each reason's own field where it was answered, else its bit in the mask; None
    when neither was read."""
    try:
        mask = int(str(row.get("clock_event_mask")), 16)
    except ValueError:
        mask = None
    own = {r: row.pop("reason:" + r, None) for r, _ in REASONS}
    if mask is None and all(v is None for v in own.values()):
        return None
    return [r for r, bit in REASONS if (own[r] if own[r] is not None else mask is not None and mask & bit)]


def parse_gpus(stdout, keys=None):
    """nvidia-smi's CSV (no header, no units) as one dict per GPU, each column under its key in
    ``keys`` (default: every field query_fields() names); a line with another number of fields is
    skipped (a warning nvidia-smi printed). The clock-event reasons are gathered in
    ``clock_events`` (a list; None when the driver answered none of them)."""
    keys = list(keys or [k for _, k in query_fields()])
    gpus = []
    for line in (stdout or "").splitlines():
        parts = line.split(",")
        if len(parts) != len(keys):
            continue
        row = {k: _value(k, p) for k, p in zip(keys, parts)}
        if "clock_event_mask" in keys or any(k.startswith("reason:") for k in keys):
            row["clock_events"] = _events(row)
        gpus.append(row)
    return gpus


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_GPU = re.compile(r"^GPU\d+$")


def parse_topo(stdout):
    """``nvidia-smi topo -m``'s matrix as {"GPU0-GPU1": "NV4", ...}: each pair of GPUs once, the
    link as nvidia-smi names it (X self; NV# NVLink; PIX, PXB, PHB, NODE, SYS PCIe paths)."""
    lines = [_ANSI.sub("", line).rstrip() for line in (stdout or "").splitlines()]
    # the header is indented (the rows start with their GPU's name): "\tGPU0\tGPU1\tCPU Affinity..."
    header = next((line for line in lines if line[:1].isspace() and re.search(r"\bGPU0\b", line)), None)
    if header is None:
        return {}
    columns = [c for c in re.split(r"\t+|\s{2,}", header.strip()) if c]
    gpus = [c for c in columns if _GPU.match(c)]
    links = {}
    for line in lines:
        cells = [c for c in re.split(r"\s+", line.strip()) if c]
        if line[:1].isspace() or not cells or not _GPU.match(cells[0]) or len(cells) < len(gpus) + 1:
            continue
        for other, link in zip(gpus, cells[1:1 + len(gpus)]):
            if other != cells[0]:
                pair = "-".join(sorted((cells[0], other), key=lambda g: int(g[3:])))
                links.setdefault(pair, link)
    return links


def ask_gpus(run, nvidia_smi):
    """nvidia-smi's answer to query_fields(): (rc, stdout, stderr, keys of its columns, what was
    asked otherwise). A driver that does not know a field (nvidia-smi exits non-zero naming it) is
    asked its older name, for the whole family (clocks_throttle_reasons.* for
    clocks_event_reasons.*), or the field is left out; each said in the last item."""
    fields = query_fields()
    chosen = {i: 0 for i in range(len(fields))}  # field -> which of its names is asked
    said = []
    for _ in range(len(fields) + 1):
        names = [fields[i][0][n] for i, n in chosen.items()]
        rc, out, err = run(query_argv(nvidia_smi, names))
        unknown = _UNKNOWN_FIELD.search("%s\n%s" % (out or "", err or ""))
        name = unknown.group(1) if unknown else None
        if name not in names or name == "index":
            return rc, out, err, [fields[i][1] for i in chosen], said
        i = list(chosen)[names.index(name)]
        if chosen[i] + 1 < len(fields[i][0]):
            family = name.rsplit(".", 1)[0]
            older = fields[i][0][chosen[i] + 1].rsplit(".", 1)[0]
            for j, n in chosen.items():
                if fields[j][0][n].rsplit(".", 1)[0] == family and n + 1 < len(fields[j][0]):
                    chosen[j] = n + 1
            said.append("%s.* asked: this driver does not know %s.*" % (older, family))
        else:
            del chosen[i]
            said.append("%s left out: this driver does not know it" % name)
    return rc, out, err, None, said


def take(run, nvidia_smi, identity=None, missing=None):
    """The fingerprint: ``identity`` (engine, version, release, profile, profile_sha256) and what
    ``nvidia_smi`` reports, asked through ``run(argv) -> (rc, stdout, stderr)`` (run_argv). Without
    an nvidia-smi (None or '': ``missing`` says why, else "not asked"; or it fails) ``gpus`` is []
    and ``nvidia_smi`` says why; the run is not failed for it. ``nvidia_smi_fields`` says which
    fields an older driver was asked otherwise or not at all."""
    fp = {k: (identity or {}).get(k) for k, _ in IDENTITY}
    fp.update({k: weights.resolved((identity or {}).get(k)) for k, _ in WEIGHTS})
    fp.update({"gpus": [], "topology": {}, "nvidia_smi": missing or "not asked"})
    if not nvidia_smi:
        return fp
    try:
        rc, out, err, keys, said = ask_gpus(run, nvidia_smi)
    except OSError as e:
        fp["nvidia_smi"] = "%s: %s" % (nvidia_smi, e)
        return fp
    fp["nvidia_smi_fields"] = said
    if rc != 0:
        fp["nvidia_smi"] = "%s exited %s: %s" % (nvidia_smi, rc, (err or out or "").strip()[:200])
        return fp
    fp["gpus"] = parse_gpus(out, keys)
    fp["nvidia_smi"] = "ok" if fp["gpus"] else "%s listed no GPU" % nvidia_smi
    try:
        rc, out, _ = run(topo_argv(nvidia_smi))
    except OSError:
        rc = 1
    fp["topology"] = parse_topo(out) if rc == 0 else {}
    return fp


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mhz(value):
    return "{:,}".format(value) if _number(value) else "n/a"


def _shown(value, unit):
    if value is None:
        return "n/a"
    if unit == "x":
        return "x%s" % value
    if unit == " MHz":
        return _mhz(value) + unit
    return "%s%s" % (value, unit)


# Clock-event reasons that hold a GPU below the clocks it could run: (kind, the reasons, phrase).
# gpu_idle is no limit (an idle GPU's clocks drop by design), nor is the display clock.
EVENT_LIMITS = (
    ("power_cap", ("sw_power_cap",), "power cap active"),
    ("thermal", ("hw_thermal_slowdown", "sw_thermal_slowdown"), "thermal slowdown"),
    ("power_brake", ("hw_power_brake_slowdown",), "power brake slowdown"),
    ("hw_slowdown", ("hw_slowdown",), "hardware slowdown"),
    ("sync_boost", ("sync_boost",), "sync boost holds the clocks"),
)


def limits(gpu, before=None):
    """What holds ``gpu``'s clocks down, as [(kind, phrase, MHz or None)]. A clock is capped when
    its application clock (nvidia-smi -ac) is below the default one or below ``before``'s (the
    baseline's reading of this GPU), or, for the SM clock of a busy GPU (gpu_idle not active),
    when applications_clocks_setting is active (-ac or locked clocks, -lgc) and the current clock
    is below the max. An idle GPU's current clock is low by design and never read as a cap (a
    locked clock then shows only at load). The active reasons are named; a busy GPU's with its SM
    clock. [] when nothing holds it or its clocks were not read."""
    events = gpu.get("clock_events") or []
    busy = gpu.get("clock_events") is not None and "gpu_idle" not in events
    out = []
    for domain, label in (("sm", "SM"), ("memory", "memory")):
        app = gpu.get("app_%s_clock_mhz" % domain)
        caps = [app for floor in (gpu.get("default_app_%s_clock_mhz" % domain),
                                  (before or {}).get("app_%s_clock_mhz" % domain))
                if _number(app) and _number(floor) and app < floor]
        current, top = gpu.get("%s_clock_mhz" % domain), gpu.get("max_%s_clock_mhz" % domain)
        if domain == "sm" and busy and "applications_clocks_setting" in events \
                and _number(current) and _number(top) and current < top:
            caps.append(current)
        if caps:
            out.append((domain + "_cap", "%s clock capped at %s MHz" % (label, _mhz(min(caps))), min(caps)))
    running = ""
    if busy and _number(gpu.get("sm_clock_mhz")) and _number(gpu.get("max_sm_clock_mhz")):
        running = " (SM clock %s of %s MHz)" % (_mhz(gpu["sm_clock_mhz"]), _mhz(gpu["max_sm_clock_mhz"]))
    for kind, reasons, phrase in EVENT_LIMITS:
        if kind == "hw_slowdown" and {"hw_thermal_slowdown", "hw_power_brake_slowdown"} & set(events):
            continue  # the umbrella of those two: named by them
        if set(reasons) & set(events):
            out.append((kind, phrase + (running if kind != "sync_boost" else ""), None))
    return out


def _gpu_differences(old, g):
    """What changed on one GPU from ``old`` to ``g``: its fields as they read, the enforced power
    limit where it does not follow the set one, a raised application clock, then each limit
    (limits()) the baseline did not have or had at a higher clock. A field one side did not ask
    (an older record or driver) is not compared."""
    out = []
    for _, key, label, unit in COMPARED:
        if key in old and key in g and old[key] != g[key]:
            out.append("%s %s -> %s" % (label, _shown(old[key], unit), _shown(g[key], unit)))
    eo, en = old.get("enforced_power_limit_w"), g.get("enforced_power_limit_w")
    if "enforced_power_limit_w" in old and "enforced_power_limit_w" in g and eo != en \
            and not (eo == old.get("power_limit_w") and en == g.get("power_limit_w")):
        out.append("enforced power limit %s -> %s" % (_shown(eo, " W"), _shown(en, " W")))
    for domain, label in (("sm", "SM"), ("memory", "memory")):
        ao, an = old.get("app_%s_clock_mhz" % domain), g.get("app_%s_clock_mhz" % domain)
        if _number(ao) and _number(an) and an > ao:
            out.append("application %s clock %s -> %s MHz" % (label, _mhz(ao), _mhz(an)))
    if "clock_events" in g:
        was = {kind: mhz for kind, _, mhz in limits(old)} if "clock_events" in old else {}
        for kind, phrase, mhz in limits(g, old):
            if kind not in was or (mhz is not None and was[kind] is not None and mhz < was[kind]):
                out.append(phrase)
    return out


def differences(before, now):
    """What changed from fingerprint ``before`` to ``now``, the host first (GPUs, then the links,
    then engine, release, profile and weights): ["GPU 1: power limit 300 W -> 250 W", "GPU 1: SM clock
    capped at 1,400 MHz", ...]. Empty when either has no fingerprint or nothing changed; a side
    whose nvidia-smi was not read is not compared on GPUs."""
    if not isinstance(before, dict) or not isinstance(now, dict):
        return []
    out = []
    gb, gn = before.get("gpus") or [], now.get("gpus") or []
    if gb and gn:
        if len(gb) != len(gn):
            out.append("GPUs %d -> %d" % (len(gb), len(gn)))
        by_index = {g.get("index"): g for g in gb}
        for g in gn:
            old = by_index.get(g.get("index"))
            if old is not None:
                out.extend("GPU %s: %s" % (g.get("index"), said) for said in _gpu_differences(old, g))
    elif gb or gn:
        out.append("GPUs read %s -> %s" % ("by nvidia-smi" if gb else "not (%s)" % before.get("nvidia_smi"),
                                           "by nvidia-smi" if gn else "not (%s)" % now.get("nvidia_smi")))
    tb, tn = before.get("topology") or {}, now.get("topology") or {}
    if tb and tn:
        for pair in sorted(set(tb) | set(tn)):
            if tb.get(pair) != tn.get(pair):
                out.append("%s link %s -> %s" % (pair, tb.get(pair) or "none", tn.get(pair) or "none"))
    for key, label in IDENTITY:
        b, n = before.get(key), now.get(key)
        if key == "profile_sha256" and before.get("profile") != now.get("profile"):
            continue  # another profile: its name says it
        if b is not None and n is not None and b != n:
            out.append("%s %s -> %s" % (label, b, n))
    out.extend(_weight_differences(before, now))
    pb, pn = before.get("prompts") or {}, now.get("prompts") or {}
    for case in sorted(set(pb) & set(pn)):
        if pb[case] != pn[case]:
            out.append("prompts of %s %s -> %s" % (case, pb[case], pn[case]))
    return out


def _weight_differences(before, now):
    """The model's and the drafter's changes: another repository, or the same repository at another
    commit (a branch that moved: the weights changed under the same name)."""
    out = []
    for key, label in WEIGHTS:
        b, n = before.get(key), now.get(key)
        if not isinstance(b, dict) or not isinstance(n, dict):
            continue
        if b.get("repo") != n.get("repo"):
            out.append("%s %s -> %s" % (label, b.get("repo"), n.get("repo")))
        elif b.get("commit") and n.get("commit") and b["commit"] != n["commit"]:
            rev = n.get("revision")
            asked = " (revision %s)" % rev if rev and rev != n["commit"] else ""
            out.append("%s %s at commit %s -> %s%s"
                       % (label, n.get("repo"), b["commit"][:12], n["commit"][:12], asked))
    return out


def text(changes):
    """'host changed since the last-known-good: a; b' ('' when nothing changed)."""
    return "host changed since the last-known-good: %s" % "; ".join(changes) if changes else ""
