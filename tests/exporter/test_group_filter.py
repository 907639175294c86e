"""--groups / --exclude-groups: whole-id regular expressions, include first, then exclude."""

from __future__ import annotations

import argparse
import re

import pytest

from backend.exporter.options import group_filter, group_pattern


@pytest.mark.parametrize(("groups", "exclude", "group", "watched"), [
    (None, None, "anything", True),
    ("orders-.*", None, "orders-eu", True),
    ("orders-.*", None, "old-orders-eu", False),  # anchored: not a search
    ("orders-.*", "orders-test-.*", "orders-test-1", False),
    ("orders-.*", "orders-test-.*", "orders-eu", True),
    (None, "connect-.*", "connect-sink", False),
    (None, "connect-.*", "payments", True),
])
def test_a_group_is_watched_when_taken_and_not_left_out(groups, exclude, group, watched):
    include = group_filter(groups and re.compile(groups), exclude and re.compile(exclude))
    assert (include is None or include(group)) is watched


def test_no_option_is_no_filter_at_all():
    assert group_filter(None, None) is None


def test_a_broken_pattern_is_one_line_naming_it():
    with pytest.raises(argparse.ArgumentTypeError, match=r"not a regular expression: '\[a'"):
        group_pattern("[a")
