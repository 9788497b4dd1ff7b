"""What every bench command shares: the exit status, the progress display, the inventory
arguments and a file written whole (stdlib only: `bench run` works without Ansible). The commands
(bench/cli.py, gate.py, compare.py, compare_plan.py, history.py) import it; it imports none of them."""
from __future__ import annotations

import os
from pathlib import Path

# The exit status of every bench command: passed (or done), failed its thresholds, not measured
# (or bad input).
EXIT_PASSED, EXIT_FAILED, EXIT_UNMEASURED = 0, 1, 2
EXIT_OK, EXIT_BAD_INPUT = EXIT_PASSED, EXIT_UNMEASURED


class PlanError(ValueError):
    """A host's variables that cannot be read or planned (bench/planner.py), said as the user
    should read it."""


def replace_text(path, text, encoding="utf-8"):
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then renamed
    over it (a reader - an interrupted tuning resuming from its tune.json, a play reading a report
    - sees the old file or the new, never half of one). Returns the path."""
    path = Path(path)
    tmp = path.with_name(".%s.%d.tmp" % (path.name, os.getpid()))
    try:
        tmp.write_text(text, encoding=encoding)
        os.replace(str(tmp), str(path))
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def progress_printer(stream):
    """The progress of a run on ``stream`` (bench/progress.py: a bar on a terminal, lines
    otherwise); bench run, bench gate, bench calibrate, bench compare."""
    from bench.progress import Progress
    return Progress(stream)


def add_inventory_args(p, host_help):
    """-i INVENTORY --host NAME [--vault-password-file FILE]: a host's variables as Ansible's."""
    p.add_argument("-i", "--inventory", metavar="INVENTORY",
                   help="an Ansible inventory (file or directory): with --host, the host's variables "
                        "(role defaults, group_vars, host_vars) as ansible-playbook sees them, --vars on top")
    p.add_argument("--host", metavar="NAME", help=host_help)
    p.add_argument("--vault-password-file", metavar="FILE",
                   help="with -i: decrypt the inventory's vaulted files (else they are skipped, with a note)")
