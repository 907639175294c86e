"""The layout judge (tests/dashboard/screen.py) on pages made to be wrong, in real Chromium.

The screen test passes when the judge finds nothing; this proves it finds what it is meant
to: each fault below is laid out on its own and must be named, and a clean page must not be.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.dashboard.screen import judge

STYLE = """
<style>
body { margin:0; font: 16px sans-serif; }
.gs-lanes .own { display:inline-block; white-space:nowrap; overflow:hidden;
                 text-overflow:ellipsis; font-size:16px; }
.gs-chip { display:inline-block; font-size:16px; }
</style>
"""

FAULTS = {
    "a button cut to a letter": (
        '<button style="width:18px;overflow:hidden;white-space:nowrap;'
        'text-overflow:ellipsis">Kill</button>', "cut: button"),
    "two texts on top of each other": (
        '<div style="position:relative;height:40px"><span style="position:absolute;left:0">'
        'lag 267 · 8.0 s</span><span style="position:absolute;left:20px">car-03</span></div>',
        "overlap:"),
    "a page wider than the window": (
        '<div style="width:3000px">wide</div>', "scrolls sideways"),
    "a chip broken over two lines": (
        '<div style="width:40px"><span class="gs-chip" style="display:inline">car-03 '
        'car-04 car-05</span></div>', "wraps: span.gs-chip"),
    "an owner's name cut in its lane": (
        '<div class="gs-lanes"><span class="own" style="width:30px">bruno-2</span></div>',
        "cut: span.own"),
    "a lane's text too small for a room": (
        '<div class="gs-lanes"><span class="own" style="font-size:11px">ada</span></div>',
        "small:"),
    "text running out of its box": (
        '<label style="display:block;width:30px;white-space:nowrap">protocol / assignor'
        '</label>', "runs out: label"),
}


@pytest.fixture(scope="module")
def page(chromium: Callable[..., Any]) -> Iterator[Any]:
    """One Chromium for every case here: each sets the page's whole content anew."""
    with chromium(viewport=(1280, 720)) as opened:
        yield opened


@pytest.mark.parametrize("fault", FAULTS)
def test_the_judge_names_each_fault(page: Any, fault: str) -> None:
    html, expected = FAULTS[fault]
    page.set_content(STYLE + html)
    problems = judge(page, fault, (1280, 720)).problems
    assert any(expected in p for p in problems), problems


def test_a_clean_page_has_no_problems(page: Any) -> None:
    html = ('<button>Kill</button> <button>Start</button><label>protocol / assignor</label>'
            '<div class="gs-lanes"><span class="own">bruno</span> '
            '<span class="gs-chip">car-03</span> '  # a handover's owner: two blocks, no wrap
            '<span class="own">chloe<span style="display:block">from ada</span></span></div>')
    page.set_content(STYLE + html)
    assert judge(page, "clean", (1280, 720)).problems == ()
