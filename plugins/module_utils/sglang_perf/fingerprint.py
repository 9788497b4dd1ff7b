# -*- coding: utf-8 -*-
"""The host's fingerprint, taken with every gate run, and what changed between two of them.

The same software on the same GPUs runs at another speed when a power limit, a clock cap, a PCIe
link or the GPU topology changed; a comparison of two runs names those first ("power limit 300 W
-> 250 W on GPU 1"), then the figures. ``take(run, nvidia_smi, identity)`` asks nvidia-smi (per
GPU: name, driver, power limit, max SM and memory clocks, PCIe generation and width, persistence
mode, ECC; ``nvidia-smi topo -m``'s GPU-to-GPU links) and adds ``identity`` (engine, version,
release, profile and the hash of its settings); ``differences(before, now)`` lists what changed,
host first. Standard library only (it runs on the host, Python 3.9+)."""
from __future__ import annotations

import hashlib
import json
import re
import subprocess

# nvidia-smi --query-gpu field -> (key, label, unit). The PCIe generation is the link's maximum (an
# idle GPU's current generation drops to save power; a board or BIOS at a lower generation lowers
# the maximum); the width is the current one (a link trained at x8 instead of x16 stays so).
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
)
NUMERIC = {"index", "power_limit_w", "max_sm_clock_mhz", "max_memory_clock_mhz", "pcie_gen", "pcie_width"}
# Compared run to run (the bus id only matches GPUs up, a name or driver change is named).
COMPARED = tuple(f for f in GPU_FIELDS if f[1] not in ("index", "bus_id"))
# What the run's identity holds, compared in this order: key -> label.
IDENTITY = (("engine", "engine"), ("version", "engine version"), ("release", "release"),
            ("profile", "profile"), ("profile_sha256", "profile settings"))
NOT_AVAILABLE = ("[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "")
# nvidia-smi on a wedged GPU can hang for minutes: the fingerprint gives up after this.
TIMEOUT_S = 30


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


def query_argv(nvidia_smi):
    return [nvidia_smi, "--query-gpu=" + ",".join(f[0] for f in GPU_FIELDS), "--format=csv,noheader,nounits"]


def topo_argv(nvidia_smi):
    return [nvidia_smi, "topo", "-m"]


def _value(key, text):
    text = text.strip()
    if text in NOT_AVAILABLE:
        return None
    if key in NUMERIC:
        try:
            number = float(text)
        except ValueError:
            return text
        return int(number) if number.is_integer() else number
    return text


def parse_gpus(stdout):
    """nvidia-smi's CSV (the GPU_FIELDS query, no header, no units) as one dict per GPU; a line
    with another number of fields is skipped (a warning nvidia-smi printed)."""
    gpus = []
    for line in (stdout or "").splitlines():
        parts = line.split(",")
        if len(parts) != len(GPU_FIELDS):
            continue
        gpus.append({f[1]: _value(f[1], p) for f, p in zip(GPU_FIELDS, parts)})
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


def take(run, nvidia_smi, identity=None, missing=None):
    """The fingerprint: ``identity`` (engine, version, release, profile, profile_sha256) and what
    ``nvidia_smi`` reports, asked through ``run(argv) -> (rc, stdout, stderr)`` (run_argv). Without
    an nvidia-smi (None or '': ``missing`` says why, else "not asked"; or it fails) ``gpus`` is []
    and ``nvidia_smi`` says why; the run is not failed for it."""
    fp = {k: (identity or {}).get(k) for k, _ in IDENTITY}
    fp.update({"gpus": [], "topology": {}, "nvidia_smi": missing or "not asked"})
    if not nvidia_smi:
        return fp
    try:
        rc, out, err = run(query_argv(nvidia_smi))
    except OSError as e:
        fp["nvidia_smi"] = "%s: %s" % (nvidia_smi, e)
        return fp
    if rc != 0:
        fp["nvidia_smi"] = "%s exited %s: %s" % (nvidia_smi, rc, (err or out or "").strip()[:200])
        return fp
    fp["gpus"] = parse_gpus(out)
    fp["nvidia_smi"] = "ok" if fp["gpus"] else "%s listed no GPU" % nvidia_smi
    try:
        rc, out, _ = run(topo_argv(nvidia_smi))
    except OSError:
        rc = 1
    fp["topology"] = parse_topo(out) if rc == 0 else {}
    return fp


def _shown(value, unit):
    if value is None:
        return "n/a"
    if unit == "x":
        return "x%s" % value
    return "%s%s" % (value, unit)


def differences(before, now):
    """What changed from fingerprint ``before`` to ``now``, the host first (GPUs, then the links,
    then engine, release and profile): ["power limit 300 W -> 250 W on GPU 1", ...]. Empty when
    either has no fingerprint or nothing changed; a side whose nvidia-smi was not read is not
    compared on GPUs."""
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
            if old is None:
                continue
            for _, key, label, unit in COMPARED:
                if old.get(key) != g.get(key):
                    out.append("%s %s -> %s on GPU %s" % (label, _shown(old.get(key), unit),
                                                          _shown(g.get(key), unit), g.get("index")))
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
    pb, pn = before.get("prompts") or {}, now.get("prompts") or {}
    for case in sorted(set(pb) & set(pn)):
        if pb[case] != pn[case]:
            out.append("prompts of %s %s -> %s" % (case, pb[case], pn[case]))
    return out


def text(changes):
    """'host changed since the last-known-good: a; b' ('' when nothing changed)."""
    return "host changed since the last-known-good: %s" % "; ".join(changes) if changes else ""
