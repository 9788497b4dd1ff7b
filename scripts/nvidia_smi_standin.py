#!/usr/bin/env python3
"""A stand-in nvidia-smi for the test hosts (no GPU there): answers what the host's fingerprint
asks (``--query-gpu=FIELDS --format=csv,noheader,nounits`` for any fields, ``topo -m``) and the
compute-apps query (nothing runs on these GPUs) in nvidia-smi's own formats, from a JSON state
file a test edits to vary the host: a power limit, a clock cap, a PCIe link, the topology.

The state file: $NVIDIA_SMI_STANDIN_STATE, else this file's path + ".json"; missing, a 2 x RTX
A6000 host (STATE below). {"gpus": [{"power.limit": 250}, {}], "topology": "PHB"} changes
only what it names: each GPU's fields over the defaults, the link between every pair of GPUs.
scripts/local-host.sh installs it in the local containers; tests/test_fingerprint.py runs it.
Python 3.9+, standard library only."""
import json
import os
import sys

GPU = {"name": "NVIDIA RTX A6000", "driver_version": "580.95.05", "memory.total": 49140,
       "power.limit": 300.0, "clocks.max.sm": 2100, "clocks.max.memory": 8001,
       "pcie.link.gen.max": 4, "pcie.link.gen.current": 4, "pcie.link.width.current": 16,
       "pcie.link.width.max": 16, "persistence_mode": "Enabled", "ecc.mode.current": "Disabled"}
STATE = {"gpus": [{}, {}], "topology": "NV4"}


def state():
    path = os.environ.get("NVIDIA_SMI_STANDIN_STATE") or os.path.realpath(__file__) + ".json"
    if not os.path.exists(path):
        return dict(STATE)
    with open(path, encoding="utf-8") as fh:
        return dict(STATE, **json.load(fh))


def gpus(st):
    out = []
    for i, own in enumerate(st["gpus"]):
        g = dict(GPU, index=i, **{"pci.bus_id": "00000000:%02X:00.0" % (i + 1)})
        g.update(own)
        out.append(g)
    return out


def shown(value):
    if isinstance(value, float):
        return "%.2f" % value
    return "[N/A]" if value is None else str(value)


def query(fields, st):
    for g in gpus(st):
        print(", ".join(shown(g.get(f)) for f in fields))


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
        query(options["--query-gpu"].split(","), st)
        return 0
    sys.stderr.write("stand-in nvidia-smi: unsupported arguments: %s\n" % " ".join(argv))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
