"""What every bench command shares: the exit status and the progress display. The commands
(bench/cli.py, gate.py, compare.py, compare_plan.py, history.py) import it; it imports none of them."""
from __future__ import annotations

# The exit status of every bench command: passed (or done), failed its thresholds, not measured
# (or bad input).
EXIT_PASSED, EXIT_FAILED, EXIT_UNMEASURED = 0, 1, 2
EXIT_OK, EXIT_BAD_INPUT = EXIT_PASSED, EXIT_UNMEASURED


def progress_printer(stream):
    """The progress of a run on ``stream`` (bench/progress.py: a bar on a terminal, lines
    otherwise); bench run, bench gate, bench calibrate, bench compare."""
    from bench.progress import Progress
    return Progress(stream)
