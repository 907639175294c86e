"""Judging a page's layout in a real browser: clipped labels, overlapping texts, sideways scroll.

A picture looked at by eye catches "K." for "Kill" once; this measures every visible text box
Chromium laid out, so a regression at any screen size fails a test. What counts:

- the page scrolls sideways (the document wider than the window);
- a label is cut: a button's, a widget label's, a lane's owner, a chip, a metric: its text is
  wider than its box while the box hides the overflow (ellipsis, `overflow:hidden`), or the
  text runs outside the box into what is beside it;
- two texts overlap: the laid-out extents of two text runs (a Range over each element's own
  text) intersect, where neither element contains the other;
- a chip or a lane's owner wraps onto a second line ("car-" / "03");
- a lane's text is smaller than the floor given (readable from the back of a room).

Plotly's SVG, the data grid's canvas and hidden elements are not texts here: the grid scrolls
inside itself by design, and Plotly lays its own labels out.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.netutil import wait_until
from tests.dashboard.browser import save_shot

# Elements whose text is a label a person reads: checked for cuts and wraps.
LABELS = ", ".join((
    "button", "label", "[data-testid=stMetricValue]", "[data-testid=stMetricLabel]",
    ".gs-chip", ".gs-lanes .own", ".gs-lanes .p", ".gs-lag em", ".gs-card .n", ".gs-card .s",
    ".gs-broker .n", ".gs-broker .s", "[data-testid=stHeading]", "[role=tab]",
))
ONE_LINE = ".gs-chip, .gs-lanes .own, button"

SCREEN_JS = """
([labels, oneLine, laneFloorPx]) => {
  const problems = [];
  const ICON = '[data-testid=stIconMaterial]';
  const SKIP = '[data-testid=stDataFrame], .js-plotly-plot, [role=tooltip], ' +
               '[data-testid=stSidebar][aria-expanded=false]';
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) {
    problems.push(`the page scrolls sideways: ${doc.scrollWidth} px wide in ${doc.clientWidth}`);
  }
  const visible = (el) => {
    if (el.closest(SKIP)) return false;
    const r = el.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return false;
    if (r.right <= 0 || r.left >= innerWidth) return false;  // a sidebar slid off a phone
    const s = getComputedStyle(el);
    return s.visibility !== 'hidden' && s.display !== 'none' && Number(s.opacity) > 0.05;
  };
  const name = (el) => {
    const key = el.closest('[class*="st-key-"]');
    const k = key ? [...key.classList].find(c => c.startsWith('st-key-')) : '';
    const t = (el.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 40);
    // not Streamlit's generated class: it changes with a widget's state (a button enabled
    // between the two measurements would hide a cut both of them saw)
    const own = typeof el.className === 'string'
      ? el.className.split(' ').find(c => c && !c.startsWith('st-emotion-cache')) : '';
    const cls = own ? '.' + own : '';
    return `${el.tagName.toLowerCase()}${cls}${k ? ' in ' + k : ''} "${t}"`;
  };
  const textRect = (el) => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return range.getBoundingClientRect();
  };
  for (const el of document.querySelectorAll(labels)) {
    if (!visible(el) || !(el.innerText || '').trim()) continue;
    const s = getComputedStyle(el);
    const hides = s.overflowX !== 'visible' || s.textOverflow === 'ellipsis';
    // the innermost block that holds the text decides: a button's <p>, a label's <p>
    for (const inner of [el, ...el.querySelectorAll('p, span, div')]) {
      if (!visible(inner) || !(inner.innerText || '').trim()) continue;
      const is = getComputedStyle(inner);
      const innerHides = hides || is.overflowX !== 'visible' || is.textOverflow === 'ellipsis';
      if (innerHides && inner.scrollWidth > inner.clientWidth + 1 && inner.clientWidth > 0) {
        problems.push(`cut: ${name(el)} needs ${inner.scrollWidth} px, has ${inner.clientWidth}`);
        break;
      }
    }
    const box = el.getBoundingClientRect();
    const text = textRect(el);
    if (text.width > 0 && (text.right > box.right + 2 || text.left < box.left - 2)) {
      const at = (a, b) => `${Math.round(a)}-${Math.round(b)}`;
      problems.push(`runs out: ${name(el)} text ${at(text.left, text.right)} ` +
                    `in box ${at(box.left, box.right)}`);
    }
  }
  for (const el of document.querySelectorAll(oneLine)) {
    if (!visible(el) || !(el.innerText || '').trim()) continue;
    // a wrap is one run of text broken over lines ("car-" / "03"); two blocks on two lines
    // (an owner and, under it, "from ada") are a layout, not a wrap. Lines are told apart by
    // more than half the type's size: an icon beside a label sits a few pixels off its line.
    const half = parseFloat(getComputedStyle(el).fontSize) * 0.5;
    const broken = textRunsOf(el).some(rects => {
      const centres = rects.map(r => (r.top + r.bottom) / 2).sort((a, b) => a - b);
      return centres.filter((c, i) => i === 0 || c - centres[i - 1] > half).length > 1;
    });
    if (broken) problems.push(`wraps: ${name(el)}`);
  }
  function textRunsOf(el) {  // per text node, its laid-out boxes; material icons left out
    const runs = [];
    const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (!n.textContent.trim() || n.parentElement.closest(ICON)) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      runs.push([...range.getClientRects()].filter(r => r.width > 1 && r.height > 1));
    }
    return runs;
  }
  if (laneFloorPx > 0) {
    const lane = '.gs-lanes .own, .gs-lanes .p, .gs-lanes .chips .gs-chip';
    for (const el of document.querySelectorAll(lane)) {
      if (!visible(el)) continue;
      const px = parseFloat(getComputedStyle(el).fontSize);
      if (px < laneFloorPx - 0.01) {
        problems.push(`small: ${name(el)} ${px} px, ${laneFloorPx} px at least`);
        break;
      }
    }
  }
  // two texts overlapping: elements holding text of their own, not nested in each other
  const leaves = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const seen = new Set();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim()) continue;
    const el = n.parentElement;
    if (!el || seen.has(el) || !visible(el) || !(el.innerText || '').trim()) continue;
    if (el.closest(ICON)) continue;
    if (el.closest('svg, script, style, [data-testid=stToolbar], header')) continue;
    seen.add(el);
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      if (r.width > 1 && r.height > 1) leaves.push([el, r]);
    }
  }
  const clip = (el, r) => {  // the part of a text run its scrolled or clipped ancestors show
    let [l, t, rt, b] = [r.left, r.top, r.right, r.bottom];
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX !== 'visible' || s.overflowY !== 'visible') {
        const ar = a.getBoundingClientRect();
        l = Math.max(l, ar.left); rt = Math.min(rt, ar.right);
        t = Math.max(t, ar.top); b = Math.min(b, ar.bottom);
      }
    }
    return [l, t, rt, b];
  };
  const boxes = leaves.map(([el, r]) => [el, clip(el, r)])
    .filter(([, b]) => b[2] - b[0] > 1 && b[3] - b[1] > 1);
  const reported = new Set();
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, ra] = boxes[i], [b, rb] = boxes[j];
      if (a === b || a.contains(b) || b.contains(a)) continue;
      const w = Math.min(ra[2], rb[2]) - Math.max(ra[0], rb[0]);
      const h = Math.min(ra[3], rb[3]) - Math.max(ra[1], rb[1]);
      if (w > 2 && h > 2) {
        const key = name(a) + '|' + name(b);
        if (reported.has(key)) continue;
        reported.add(key);
        problems.push(`overlap: ${name(a)} and ${name(b)} (${Math.round(w)}x${Math.round(h)} px)`);
      }
    }
  }
  return problems;
}
"""

# The sizes a stage is seen at: a projector, a laptop, a full-HD screen, a participant's phone.
SIZES: tuple[tuple[int, int], ...] = ((1280, 720), (1366, 768), (1920, 1080), (390, 844))
LANE_FLOOR_PX = 14.0  # a lane's text at 1280×720 and up, read from the back of a room


@dataclass(frozen=True)
class Verdict:
    """What one page at one size showed wrong (nothing: it passes)."""

    page: str
    size: tuple[int, int]
    problems: tuple[str, ...]

    def __str__(self) -> str:
        head = f"{self.page} at {self.size[0]}x{self.size[1]}"
        return head + ("" if not self.problems else ":\n  " + "\n  ".join(self.problems))


def judge(page: Any, label: str, size: tuple[int, int]) -> Verdict:
    """Measure the page as laid out now (the caller has sized and settled it)."""
    floor = LANE_FLOOR_PX if size[0] >= 1280 else 0.0
    problems = page.evaluate(SCREEN_JS, [LABELS, ONE_LINE, floor])
    return Verdict(label, size, tuple(problems))


# What a resize changes and settles: the main area's size, each chart's and lane grid's box
# (Plotly redraws on a debounce), and whether Streamlit still marks elements stale.
LAYOUT_JS = """
() => [...document.querySelectorAll('[data-testid=stMain], .js-plotly-plot, .gs-lanes')]
  .map(e => { const b = e.getBoundingClientRect();
              return `${Math.round(b.width)}x${Math.round(b.height)}`; }).join(',') +
  '|' + document.querySelectorAll('[data-stale="true"]').length
"""
SETTLE_S = 5.0  # a live page may never hold still that long; then it is measured as it is


def settle(page: Any) -> None:
    """Wait until two readings of the layout a quarter second apart agree."""
    last: list[str | None] = [None]

    def held() -> bool:
        now = page.evaluate(LAYOUT_JS)
        same, last[0] = now == last[0], now
        return same

    with contextlib.suppress(TimeoutError):
        wait_until(held, SETTLE_S, interval=0.25)


def judged(page: Any, label: str, size: tuple[int, int], shots: Path) -> Verdict:
    """`page` laid out at `size`, measured, photographed into `shots`. A problem counts only
    when a second measurement, once the layout has settled again, shows it too: a live panel
    redrawn between the two is not a layout fault."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    settle(page)
    first = judge(page, label, size)
    if first.problems:
        settle(page)
        again = judge(page, label, size)
        first = Verdict(label, size, tuple(p for p in first.problems if p in again.problems))
    shots.mkdir(parents=True, exist_ok=True)
    save_shot(page, shots / f"{label}-{size[0]}x{size[1]}.png")
    return first


def assert_fits(page: Any, label: str, shots: Path,
                sizes: Sequence[tuple[int, int]] = SIZES) -> None:
    """Fail naming every problem of `page` at any of `sizes`; the viewport is left as it
    was found."""
    before = page.viewport_size
    try:
        failed = [v for v in (judged(page, label, size, shots) for size in sizes) if v.problems]
    finally:
        if before:
            page.set_viewport_size(before)
    assert not failed, "\n".join(str(v) for v in failed)
