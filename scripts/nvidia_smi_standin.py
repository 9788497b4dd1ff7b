#!/usr/bin/env python3
"""A stand-in nvidia-smi for the test hosts (no GPU there): answers what the host's fingerprint
asks (``--query-gpu=FIELDS --format=csv,noheader,nounits`` for any fields, ``topo -m``) and the
compute-apps query (nothing runs on these GPUs) in nvidia-smi's own formats, from a JSON state
file a test edits to vary the host: a power limit, a clock cap, a throttle, a PCIe link, the
topology, an older driver.

The state file: $NVIDIA_SMI_STANDIN_STATE, else this file's path + ".json"; missing, a 2 x RTX
A6000 host at idle (STATE below). {"gpus": [{"power.limit": 250}, {}], "topology": "PHB"} changes
only what it names: each GPU's fields by their nvidia-smi names over the defaults, the link
between every pair of GPUs. A GPU's "clocks_event_reasons" lists its active clock-event reasons
(default ["gpu_idle"]): the .active mask and each reason's field follow from it; its enforced
power limit follows its power limit unless set. A GPU's clock-event counters
(clocks_event_reasons_counters.<reason>, microseconds held down since the driver loaded, driver
580's names) stand still unless a "slowdown" holds it: {"reason": "sw_thermal_slowdown",
"after_s": 2} starts the slowdown 2 s after the first query that reads the state (that query
writes its start into the state file as "since", a Unix time; a test may give "since" itself):
from then on the reason is active (gpu_idle no longer) and its counter grows with the wall time.
"unknown_fields": [names, or prefixes ending in *] makes it a driver that does not know those
fields (it exits 2 naming the first asked, as nvidia-smi does): ["clocks_event_reasons_counters.*"]
is a driver before the counters.
scripts/local-host.sh installs it in the local containers; tests/test_fingerprint.py runs it.
Python 3.9+, standard library only."""
import json
import os
import sys
import time

GPU = {"name": "NVIDIA RTX A6000", "driver_version": "580.95.05", "memory.total": 49140,
       "power.limit": 300.0, "power.default_limit": 300.0, "clocks.max.sm": 2100,
       "clocks.max.memory": 8001, "clocks.applications.graphics": 1800,
       "clocks.default_applications.graphics": 1800, "clocks.applications.memory": 8001,
       "clocks.default_applications.memory": 8001, "clocks.current.sm": 210,
       "clocks.current.memory": 405, "clocks_event_reasons": ["gpu_idle"],
       "pcie.link.gen.max": 4, "pcie.link.gen.current": 4, "pcie.link.width.current": 16,
       "pcie.link.width.max": 16, "persistence_mode": "Enabled", "ecc.mode.current": "Disabled",
       # what a driver that has run for a while has counted (us); no slowdown since
       "clocks_event_reasons_counters.sw_power_cap": 4180250000,
       "clocks_event_reasons_counters.sync_boost": 0,
       "clocks_event_reasons_counters.sw_thermal_slowdown": 12500000,
       "clocks_event_reasons_counters.hw_thermal_slowdown": 0,
       "clocks_event_reasons_counters.hw_power_brake_slowdown": 0}
STATE = {"gpus": [{}, {}], "topology": "NV4"}
# nvmlClocksEventReasons' bits, as the .active mask carries them
REASON_BITS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4,
               "hw_slowdown": 0x8, "sync_boost": 0x10, "sw_thermal_slowdown": 0x20,
               "hw_thermal_slowdown": 0x40, "hw_power_brake_slowdown": 0x80, "display_clock_setting": 0x100}
# the other names nvidia-smi --help-query-gpu gives a field -> its name here
ALIASES = {"clocks.sm": "clocks.current.sm", "clocks.mem": "clocks.current.memory",
           "clocks.gr": "clocks.current.graphics", "clocks.applications.gr": "clocks.applications.graphics",
           "clocks.applications.mem": "clocks.applications.memory",
           "clocks.default_applications.gr": "clocks.default_applications.graphics",
           "clocks.default_applications.mem": "clocks.default_applications.memory",
           "clocks.max.gr": "clocks.max.graphics", "clocks.max.mem": "clocks.max.memory",
           "gpu_name": "name", "gpu_bus_id": "pci.bus_id"}


def state():
    path = os.environ.get("NVIDIA_SMI_STANDIN_STATE") or os.path.realpath(__file__) + ".json"
    if not os.path.exists(path):
        return dict(STATE)
    with open(path, encoding="utf-8") as fh:
        st = dict(STATE, **json.load(fh))
    slowdowns = [g["slowdown"] for g in st["gpus"] if g.get("slowdown") and "since" not in g["slowdown"]]
    if slowdowns:  # the first query that reads them: they start after_s from now
        for s in slowdowns:
            s["since"] = time.time() + float(s.get("after_s", 0))
        with open(path + ".new", "w", encoding="utf-8") as fh:
            json.dump(st, fh)
        os.replace(path + ".new", path)
    return st


def held(g, active):
    """A GPU's slowdown, from its "since" on: its reason active, its counter grown by the time."""
    slow = g.pop("slowdown", None)
    if not slow or time.time() < slow["since"]:
        return active
    counter = "clocks_event_reasons_counters." + slow["reason"]
    if counter in g:
        g[counter] += int((time.time() - slow["since"]) * 1e6)
    return [r for r in active if r != "gpu_idle"] + [slow["reason"]]


def gpus(st):
    out = []
    for i, own in enumerate(st["gpus"]):
        g = dict(GPU, index=i, **{"pci.bus_id": "00000000:%02X:00.0" % (i + 1)})
        g.update(own)
        g.setdefault("enforced.power.limit", g["power.limit"])
        active = held(g, g.pop("clocks_event_reasons"))
        g["clocks_event_reasons.active"] = "0x%016X" % sum(REASON_BITS[r] for r in active)
        for reason in REASON_BITS:
            g["clocks_event_reasons." + reason] = "Active" if reason in active else "Not Active"
        out.append(g)
    return out


def field(name):
    """A queried name as the GPU dicts hold it (the older clocks_throttle_reasons.* too)."""
    if name.startswith("clocks_throttle_reasons."):
        name = "clocks_event_reasons." + name.split(".", 1)[1]
    return ALIASES.get(name, name)


def shown(value):
    if isinstance(value, float):
        return "%.2f" % value
    return "[N/A]" if value is None else str(value)


def query(fields, st):
    unknown = [f for f in fields for u in st.get("unknown_fields", ())
               if f == u or u.endswith("*") and f.startswith(u[:-1])]
    if unknown:
        print('Field "%s" is not a valid field to query.' % unknown[0])
        return 2
    for g in gpus(st):
        print(", ".join(shown(g.get(field(f))) for f in fields))
    return 0


def topo(st):
    n = len(st["gpus"])
    names = ["GPU%d" % i for i in range(n)]
    print("\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID")
    for i, name in enumerate(names):
        links = [" X " if j == i else st["topology"] for j in range(n)]
        print(name + "\t" + "\t".join(links) + "\t0-31\t0\t\tN/A")
    print("\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP "
          "interconnect between NUMA nodes\n  PHB  = Connection traversing PCIe as well as a PCIe "
          "Host Bridge\n  NV#  = Connection traversing a bonded set of # NVLinks")


def main(argv):
    st = state()
    if len(argv) >= 2 and argv[0] == "topo" and argv[1] == "-m":
        topo(st)
        return 0
    options = dict(a.split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if "--query-compute-apps" in options:
        return 0  # no process on these GPUs
    if "--query-gpu" in options and options.get("--format", "").startswith("csv,noheader"):
        return query(options["--query-gpu"].split(","), st)
    sys.stderr.write("stand-in nvidia-smi: unsupported arguments: %s\n" % " ".join(argv))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
