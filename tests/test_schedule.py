"""The suite's schedule: scripts/molecule_run.py's start order (the shortest expected wall time for
the job count), conftest.py's test order (the long tests first) and the `long` marker that keeps
them out of make check."""
from __future__ import annotations

import ast
import re

import pytest

import conftest
from conftest import LINT_TEST, LONG_TESTS, ROOT, run_order
from scripts import molecule_run as mr

MEASURED = mr.FIRST_RUN_TIMES


def test_a_fresh_clone_knows_every_scenarios_time():
    # without it a scenario missing from the first-run table started last (engine_switch did)
    assert sorted(MEASURED) == mr.scenario_names()


def test_wall_time_of_a_start_order():
    assert mr.wall_time([5.0], 1) == 5.0
    assert mr.wall_time([3.0, 2.0, 1.0], 1) == 6.0
    assert mr.wall_time([3.0, 2.0, 1.0], 6) == 3.0
    assert mr.wall_time([1.0, 1.0, 2.0], 2) == 3.0  # the 2 s one starts at 1 s
    assert mr.wall_time([2.0, 1.0, 1.0], 2) == 2.0
    assert mr.wall_time([1.0] * 1024, 2) == 512.0


def test_the_order_beats_slowest_first_on_the_measured_times():
    names = sorted(MEASURED)
    best = mr.order(names, 2, MEASURED)
    assert sorted(best) == names
    # the last fresh clone's order, slowest first, the best
    assert mr.wall_time([MEASURED[n] for n in mr.order(names, 1, MEASURED)], 2) == 1116
    assert mr.wall_time([MEASURED[n] for n in best], 2) == 1052
    assert mr.wall_time([MEASURED[n] for n in mr.order(names, 3, MEASURED)], 3) == 768  # 226 + 258 + 284


def test_edges_one_scenario_many_and_an_unknown_one():
    assert mr.order(["sglang"], 2, MEASURED) == ["sglang"]
    assert mr.order([], 2, MEASURED) == []
    # never measured: counted as the longest, so it starts first
    assert mr.order(["nvidia_gpu", "new_one", "sglang"], 2, MEASURED)[0] == "new_one"
    # above EXACT_ORDER_MAX: slowest first, without trying every order
    many = {"s%02d" % i: float(i) for i in range(mr.EXACT_ORDER_MAX + 2)}
    assert mr.order(sorted(many), 2, many) == sorted(many, key=lambda n: -many[n])


def test_each_long_test_names_a_test_of_the_other_tiers():
    # a renamed test would silently fall back to collection order
    for name in LONG_TESTS:
        path, test = name.split("::")
        tree = ast.parse((ROOT / "tests" / path).read_text())
        assert test in {f.name for f in tree.body if isinstance(f, ast.FunctionDef)}, name


class Collected:
    """What the conftest's ordering and marking read of a collected test (a parametrized one: its
    name carries the parameters, originalname not), and the markers it adds."""

    def __init__(self, name, test, container=False):
        self.path = ROOT / "tests" / name
        self.originalname = test
        self.name = test + "[a-parameter]"
        self.container = container
        self.markers = []

    def get_closest_marker(self, marker):
        return object() if self.container and marker == "container" else None

    def add_marker(self, marker):
        self.markers.append(marker.name)


def test_the_long_tests_run_first_after_the_container_tier():
    first, second = (t.split("::") for t in LONG_TESTS[:2])
    items = [Collected("test_a.py", "test_x"), Collected(*second),
             Collected("test_secrets.py", "test_secrets_never_leak", True), Collected(*first),
             Collected("test_unlisted_host.py", "test_y", True)]
    order = [(i.path.name, i.originalname) for i in sorted(items, key=run_order)]
    assert order == [("test_secrets.py", "test_secrets_never_leak"), ("test_unlisted_host.py", "test_y"),
                     tuple(first), tuple(second), ("test_a.py", "test_x")]


def test_every_container_tier_file_is_on_one_container():
    """A container tier file left out of CONTAINER_FILES would run on the default container beside
    the files that are on it, its deploys racing theirs for the host's deploy lock."""
    from conftest import CONTAINER_FILES
    marked = re.compile(r"^(pytestmark = .*|@)(needs_local_host|pytest\.mark\.container)", re.M)
    tier = sorted(p.name for p in (ROOT / "tests").glob("test_*.py") if marked.search(p.read_text()))
    assert "test_deploy.py" in tier and "test_drafter_host.py" in tier
    missing = [name for name in tier if name not in CONTAINER_FILES]
    assert missing == [], "add each to conftest.CONTAINER_FILES: %s" % ", ".join(missing)


def test_the_long_tests_are_marked_long_but_the_lint():
    listed = [Collected(*t.split("::")) for t in LONG_TESTS]
    other = Collected("test_verdict.py", "test_a_quick_one")
    conftest.pytest_collection_modifyitems(listed + [other])
    marked = sorted(conftest.listed_name(i) for i in listed if i.markers == ["long"])
    assert marked == sorted(set(LONG_TESTS) - {LINT_TEST}) and other.markers == []
    assert LINT_TEST in LONG_TESTS  # started first, and kept in make check


@pytest.mark.parametrize("target, selects", [("check", "and not long"), ("check-long", "and long")])
def test_make_check_leaves_the_long_tests_to_make_test(target, selects):
    """make check and make check-long split the tier between them; make test (scripts/suite.py)
    selects no marker: every tier, the long tests too."""
    recipe = re.search(r"^%s:.*\n\t(.*)$" % re.escape(target), (ROOT / "Makefile").read_text(), re.M).group(1)
    assert re.search(r'-m "\$\(CHECK_TIER\) %s"' % selects, recipe), recipe
    assert re.search(r"^CHECK_TIER := not container and not contract$", (ROOT / "Makefile").read_text(), re.M)
    suite = (ROOT / "scripts" / "suite.py").read_text()
    pytest_args = suite.split('"-m", "pytest"', 1)[1].split("]", 1)[0]
    assert "-n" in pytest_args and '"-m"' not in pytest_args, pytest_args
