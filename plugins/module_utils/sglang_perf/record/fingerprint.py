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
a moving ``main`` is named; ``limits(gpu)`` says what holds a GPU's clocks down at that instant;
``differences(before, now)`` lists what changed, host first.

What held the clocks down during a measurement: ``watch(run, nvidia_smi)`` reads the clock-event
counters at its start (read_clocks) and ``.stop()`` at its end; ``held_down(start, end)`` turns the
two readings into each reason's seconds and share of the time. A driver without the counters is
sampled instead: a thread reads the active reasons every SAMPLE_EVERY_S seconds (sampled()).
``held_text(held, before)`` names each slowdown ("GPU 0 held by sw_thermal_slowdown for 62% of the
measurement (31 of 50 s)"); one the baseline did not have is a change (differences). Standard
library only (it runs on the host, Python 3.9+)."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import threading
import time

from ..host import weights

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


# hw_slowdown is the umbrella of these two: where either is active, it names the slowdown.
HW_SLOWDOWN_CAUSES = ("hw_thermal_slowdown", "hw_power_brake_slowdown")


def _named_by_its_cause(reason, events):
    """Whether ``reason`` is hw_slowdown and one of its causes is among the active ``events``."""
    return reason == "hw_slowdown" and bool(set(HW_SLOWDOWN_CAUSES) & set(events))


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
        if _named_by_its_cause(kind, events):
            continue
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
    """What changed from fingerprint ``before`` to ``now``, the host first (GPUs, a slowdown that
    held them during one measurement and not the other (held_changes), then the links, then
    engine, release, profile and weights): ["GPU 1: power limit 300 W -> 250 W", "GPU 1: SM clock
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
    out.extend(held_changes(before.get("held_down"), now.get("held_down")))
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


# ------------------------------------------------------- what held the clocks down, and for how long --
# A reading taken before a measurement sees none of what happens during it (an idle GPU shows
# gpu_idle). The driver counts, per reason, the microseconds it held the clocks down since it
# loaded: clocks_event_reasons_counters.<reason>, these five under these names on a real driver
# 580.159.04 (H200, `nvidia-smi --help-query-gpu`, recorded in the project's notes on what
# nvidia-smi reports); there is none for hw_slowdown, the umbrella of the two hardware ones. Their
# difference over a measurement is the time each reason held it. A value is read as a number
# (--format=csv,noheader,nounits), [N/A] is left out. A driver without them (older ones;
# nvidia-smi exits 2 naming the first field it does not know) is sampled instead.
COUNTED = ("sw_power_cap", "sync_boost", "sw_thermal_slowdown", "hw_thermal_slowdown",
           "hw_power_brake_slowdown")
COUNTER_FIELDS = tuple("clocks_event_reasons_counters." + r for r in COUNTED)
# The reasons a measurement is held down by. gpu_idle (clocks low because nothing runs),
# applications_clocks_setting (a setting: limits() names the cap it makes, and the comparison
# with the baseline names the setting) and display_clock_setting are not slowdowns of a
# measurement; hw_slowdown only counts alone (its two causes name themselves).
SLOWDOWNS = ("sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal_slowdown",
             "hw_thermal_slowdown", "hw_power_brake_slowdown")
# A slowdown is named when it held a GPU for at least this share of the measurement. Below it a
# reason cannot cost a median more than about that share even were the clocks stopped outright
# (far less at a lowered clock), which is within a run's spread; and where the reasons are
# sampled, 5% of a minute's measurement is three samples: one sample alone is no evidence.
HELD_FLOOR = 0.05
# How often the active reasons are read where the counters are missing: a query takes 0.1-0.3 s
# on a real host, so one a second costs little and still sees a slowdown of a few seconds.
SAMPLE_EVERY_S = 1.0
# The .active mask's names, newest first (clocks_throttle_reasons.* before driver 535).
ACTIVE_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")


def _rows(run, nvidia_smi, names):
    """nvidia-smi's answer to ``index`` and ``names``, one row of stripped texts per GPU: (rows,
    None), or (None, why) when it could not be read (``unknown`` set when the driver does not
    know a field). Raises nothing."""
    argv = query_argv(nvidia_smi, ["index"] + list(names))
    try:
        rc, out, err = run(argv)
    except OSError as e:
        return None, {"why": "%s: %s" % (nvidia_smi, e)}
    unknown = _UNKNOWN_FIELD.search("%s\n%s" % (out or "", err or ""))
    if rc != 0:
        if unknown:
            name = unknown.group(1)
            return None, {"why": "this driver does not know %s" % name, "unknown": name}
        return None, {"why": "%s exited %s: %s" % (nvidia_smi, rc, (err or out or "").strip()[:200])}
    rows = [[p.strip() for p in line.split(",")] for line in (out or "").splitlines()]
    rows = [r for r in rows if len(r) == len(names) + 1 and r[0].isdigit()]
    if not rows:
        return None, {"why": "%s listed no GPU" % nvidia_smi}
    return rows, None


def read_clocks(run, nvidia_smi, clock=time.monotonic):
    """One clock reading: ``at`` (``clock``'s seconds, halfway through the query) and
    ``counters``, {GPU index: {reason: microseconds}} for each COUNTED reason the driver answered
    ([N/A] is left out); ``counters`` None with ``why`` when it answered none (``unknown``: the
    field a driver without counters named)."""
    began = clock()
    rows, failed = _rows(run, nvidia_smi, COUNTER_FIELDS)
    reading = {"at": (began + clock()) / 2.0, "counters": None}
    if failed:
        reading.update(failed)
        return reading
    counters = {}
    for row in rows:
        values = {r: int(float(v)) for r, v in zip(COUNTED, row[1:]) if re.match(r"^\d+(\.\d*)?$", v)}
        if values:
            counters[int(row[0])] = values
    if counters:
        reading["counters"] = counters
    else:
        reading["why"] = "no GPU answered a clock-event counter ([N/A])"
    return reading


def _share(seconds, elapsed):
    return round(min(1.0, seconds / elapsed), 3)


def _held(gpu, reason, seconds, elapsed, samples=None):
    out = {"gpu": gpu, "reason": reason, "seconds": round(min(seconds, elapsed), 1),
           "share": _share(seconds, elapsed)}
    if samples is not None:
        out["samples"] = samples
    return out


def _summary(how, elapsed, floor, held, notes, **more):
    """held_down's and sampled()'s answer: the slowdowns at or above ``floor``, per GPU, the
    longest first."""
    kept = sorted((h for h in held if h["share"] >= floor),
                  key=lambda h: (h["gpu"], -h["share"], h["reason"]))
    return dict({"how": how, "seconds": round(elapsed, 1), "floor": floor, "held": kept, "notes": notes},
                **more)


def held_down(start, end, floor=HELD_FLOOR):
    """What held the clocks down between two readings (read_clocks'): {"how": "counters",
    "seconds": the time between them, "floor", "held": [{"gpu", "reason", "seconds", "share"}]
    (each reason whose share of the time is at least ``floor``), "notes"}. A GPU read at one end
    only, or a counter that went back (a driver reload or a GPU reset between the readings), is
    noted, not judged. Without counters on both sides, or no time between them: ``how`` None and
    ``why``."""
    elapsed = end["at"] - start["at"]
    if start.get("counters") is None or end.get("counters") is None:
        return {"how": None, "why": (start if start.get("counters") is None else end).get("why")}
    if elapsed <= 0:
        return {"how": None, "why": "no time passed between the two readings"}
    held, notes = [], []
    a, b = start["counters"], end["counters"]
    for gpu in sorted(set(a) | set(b)):
        if gpu not in a or gpu not in b:
            notes.append("GPU %s: read at the %s only" % (gpu, "start" if gpu in a else "end"))
            continue
        for reason in COUNTED:
            was, now = a[gpu].get(reason), b[gpu].get(reason)
            if was is None or now is None:
                continue
            if now < was:
                notes.append("GPU %s: the %s counter went back (%d -> %d us: a driver reload or a GPU "
                             "reset?), not judged" % (gpu, reason, was, now))
                continue
            held.append(_held(gpu, reason, (now - was) / 1e6, elapsed))
    return _summary("counters", elapsed, floor, held, notes)


def read_active(run, nvidia_smi, names=ACTIVE_FIELDS):
    """The slowdowns active now, ({GPU index: [reasons]}, the mask's field the driver knew: the
    older name where it does not know the newest); (None, why) when neither could be read."""
    why = None
    for name in names:
        rows, failed = _rows(run, nvidia_smi, [name])
        if failed:
            why = failed["why"]
            if failed.get("unknown") == name:
                continue
            return None, why
        out = {}
        for row in rows:
            active = _events({"clock_event_mask": row[1]})  # the mask's reasons, as a fingerprint reads them
            if active is None:
                continue
            out[int(row[0])] = [r for r in SLOWDOWNS if r in active and not _named_by_its_cause(r, active)]
        return (out, name) if out else (None, "no GPU answered %s" % name)
    return None, why


def sampled(samples, elapsed, floor=HELD_FLOOR):
    """What held the clocks down, from ``samples`` (read_active's, in order): {"how": "sampled",
    "seconds": ``elapsed``, "samples", "floor", "held": [{"gpu", "reason", "seconds", "share",
    "samples", "sampled"}] (each reason active in at least ``floor`` of the ``sampled`` samples
    its GPU answered; seconds = share x elapsed), "notes"}."""
    if not samples:
        return {"how": None, "why": "no sample of the active reasons was read"}
    if elapsed <= 0:
        return {"how": None, "why": "no time passed between the first sample and the last"}
    held = []
    for gpu in sorted({g for s in samples for g in s}):
        seen = [s[gpu] for s in samples if gpu in s]
        for reason in SLOWDOWNS:
            n = sum(1 for active in seen if reason in active)
            if n:
                held.append(dict(_held(gpu, reason, elapsed * n / len(seen), elapsed),
                                 samples=n, sampled=len(seen)))
    return _summary("sampled", elapsed, floor, held, [], samples=len(samples))


class Watch(object):
    """The clocks over one measurement (watch()); ``stop()`` ends it and says what held them down
    (held_down's answer, or sampled()'s where the driver has no counters: a daemon thread reads
    the active reasons every ``every_s`` seconds until then). stop() may be called again: it
    returns the same answer."""

    def __init__(self, run, nvidia_smi, every_s=SAMPLE_EVERY_S, floor=HELD_FLOOR, clock=time.monotonic):
        self.run, self.nvidia_smi, self.every_s, self.floor = run, nvidia_smi, every_s, floor
        self.clock, self.end = clock, None
        self.result, self.samples, self.thread, self.fields = None, [], None, ACTIVE_FIELDS
        self.stopping = threading.Event()
        if not nvidia_smi:
            self.start = None
            self.result = {"how": None, "why": "no nvidia-smi asked"}
            return
        self.start = read_clocks(run, nvidia_smi, clock)
        if self.start["counters"] is None:
            self.began = clock()
            why = self._sample()
            if why is None:
                self.thread = threading.Thread(target=self._sampling, name="clock-event-sampler")
                self.thread.daemon = True
                self.thread.start()
            else:
                self.result = {"how": None,
                               "why": "%s; the active reasons: %s" % (self.start.get("why"), why)}

    def _sample(self):
        """One sample of the active reasons, kept; why none, else None."""
        active, said = read_active(self.run, self.nvidia_smi, self.fields)
        if active is None:
            return said
        self.fields = (said,)  # the name this driver knows, asked from now on
        self.samples.append(active)
        return None

    def _sampling(self):
        while not self.stopping.wait(self.every_s):
            self._sample()

    def stop(self):
        if self.result is not None:
            return self.result
        if self.thread is None:
            self.end = read_clocks(self.run, self.nvidia_smi, self.clock)
            self.result = held_down(self.start, self.end, self.floor)
            return self.result
        self.stopping.set()
        self.thread.join(TIMEOUT_S + self.every_s)
        self._sample()
        self.result = sampled(self.samples, self.clock() - self.began, self.floor)
        self.result.update(why=self.start.get("why"), every_s=self.every_s)
        return self.result


def watch(run, nvidia_smi, every_s=SAMPLE_EVERY_S, floor=HELD_FLOOR):
    """Start watching the clocks of ``nvidia_smi``'s GPUs, asked through ``run(argv) -> (rc, stdout,
    stderr)`` (run_argv): the counters read now (or the sampler started); the Watch's ``stop()``
    says what held them down since. Without an nvidia-smi (None or ''), stop() says so."""
    return Watch(run, nvidia_smi, every_s, floor)


def _measured(held):
    """{(gpu, reason): slowdown} of a watch's answer; None where it measured nothing."""
    if not isinstance(held, dict) or held.get("how") is None:
        return None
    return {(h.get("gpu"), h.get("reason")): h for h in held.get("held") or [] if isinstance(h, dict)}


def _pct(share):
    return "%.0f%%" % (100 * share)


def _seconds(value):
    """Seconds as a measurement's phrase gives them: whole from 10 s, else to a tenth."""
    return "%.0f" % value if value >= 10 else "%.1f" % value


def _held_phrase(h, seconds):
    """'held by sw_thermal_slowdown for 62% of the measurement (31 of 50 s)' (or 'of 50 samples')."""
    if h.get("sampled"):
        return "held by %s for %s of the measurement (%d of %d samples)" % (
            h["reason"], _pct(h["share"]), h["samples"], h["sampled"])
    return "held by %s for %s of the measurement (%s of %s s)" % (h["reason"], _pct(h["share"]),
                                                                 _seconds(h["seconds"]), _seconds(seconds))


def held_changes(before, now):
    """The slowdowns that changed from the baseline's watch ``before`` to ``now`` (each a watch's
    answer, as a fingerprint's ``held_down`` records it): 'GPU 0: held by sw_thermal_slowdown for
    62% of the measurement (31 of 50 s)' for one the baseline was not held by, 'GPU 0: no longer
    held by sw_power_cap (41% of the last-known-good's measurement)' for the reverse. [] where
    either side measured nothing."""
    b, n = _measured(before), _measured(now)
    if b is None or n is None:
        return []
    out = ["GPU %s: %s" % (gpu, _held_phrase(h, now.get("seconds")))
           for (gpu, reason), h in n.items() if (gpu, reason) not in b]
    out.extend("GPU %s: no longer held by %s (%s of the last-known-good's measurement)"
               % (gpu, reason, _pct(h["share"])) for (gpu, reason), h in sorted(b.items())
               if (gpu, reason) not in n)
    return out


def held_text(held, before=None):
    """Each slowdown of a watch's answer ``held`` that held_changes does not name as a change from
    ``before`` (the baseline's; None: no baseline), as a phrase: 'GPU 0 held by sw_power_cap for
    45% of the measurement (23 of 50 s; 40% in the last-known-good's)'. [] when none held it."""
    n, b = _measured(held), _measured(before)
    out = []
    for (gpu, reason), h in (n or {}).items():
        if b is not None and (gpu, reason) not in b:
            continue  # a change: held_changes names it
        phrase = "GPU %s %s" % (gpu, _held_phrase(h, held.get("seconds")))
        if b is not None:
            phrase = phrase[:-1] + "; %s in the last-known-good's)" % _pct(b[(gpu, reason)]["share"])
        out.append(phrase)
    return out
