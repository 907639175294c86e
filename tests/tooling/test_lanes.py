"""`make test`'s runner: when it splits the suite into lanes and when it leaves pytest alone."""

from __future__ import annotations

import pytest

from tests.lanes import chooses_tests


@pytest.mark.parametrize("args", [
    [], ["-ra", "--durations=15"], ["-x", "-q"], ["--durations", "15"], ["-p", "no:randomly"],
])
def test_plain_options_run_two_lanes(args):
    assert not chooses_tests(args)


@pytest.mark.parametrize("args", [
    ["-m", "not browser"], ["-k", "replica"], ["--lf"], ["-ra", "tests/helpers/test_proc.py"],
    ["tests/helpers/test_proc.py::test_spawn_runs_the_command"], ["tests/observer"],
    ["--deselect=tests/helpers/test_proc.py::x"],
])
def test_options_that_choose_tests_run_one_plain_pytest(args):
    assert chooses_tests(args)
