"""Replica names and colours: stable, unique, readable for 16+ replicas."""

from __future__ import annotations

import itertools

import pytest

from backend.supervisor.names import (
    NAME_RE,
    NAMES,
    PALETTE,
    colour_for,
    contrast_ratio,
    luminance,
    name_at,
    next_free_name,
    ordinal_of,
    text_colour_on,
)

WHITE, STREAMLIT_DARK = "#ffffff", "#0e1117"


def test_names_have_distinct_initials_and_are_valid_client_ids() -> None:
    assert len({n[0] for n in NAMES}) == len(NAMES) == 26
    assert all(NAME_RE.match(n) for n in NAMES)


def test_name_sequence_is_stable_and_invertible() -> None:
    assert [name_at(i) for i in range(3)] == ["ada", "bruno", "chloe"]
    assert name_at(26) == "ada-2" and name_at(53) == "bruno-3"
    for i in range(200):
        assert ordinal_of(name_at(i)) == i
    assert len({name_at(i) for i in range(200)}) == 200
    for foreign in ("bob", "ada-1", "ada-02", "ada-x", "", "replica-7"):
        assert ordinal_of(foreign) is None
    with pytest.raises(ValueError):
        name_at(-1)


def test_next_free_name_fills_the_lowest_gap() -> None:
    assert next_free_name(set()) == "ada"
    assert next_free_name({"ada", "bruno"}) == "chloe"
    assert next_free_name({"ada", "chloe"}) == "bruno"
    assert next_free_name(set(NAMES)) == "ada-2"


def test_palette_is_large_distinct_and_starts_purple_then_blue() -> None:
    assert len(PALETTE) >= 16
    assert len(set(PALETTE)) == len(PALETTE)
    r, g, b = (int(PALETTE[0][i:i + 2], 16) for i in (1, 3, 5))
    assert b > g and r > g  # purple
    r, g, b = (int(PALETTE[1][i:i + 2], 16) for i in (1, 3, 5))
    assert b > r and b > g  # blue


def _lab(c: str) -> tuple[float, float, float]:
    """sRGB hex -> CIE L*a*b* (D65), to measure how different two colours look."""
    def lin(u: float) -> float:
        return u / 12.92 if u <= 0.04045 else ((u + 0.055) / 1.055) ** 2.4

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    r, g, b = (lin(int(c[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_first_16_colours_are_far_apart() -> None:
    """No two of the first 16 replicas get colours that are hard to tell apart (CIE76)."""
    def delta_e(a: str, b: str) -> float:
        return sum((p - q) ** 2 for p, q in zip(_lab(a), _lab(b), strict=True)) ** 0.5

    closest = min(delta_e(a, b) for a, b in itertools.combinations(PALETTE[:16], 2))
    assert closest > 18, closest
    # the rest only need to differ from every one of the first 16 noticeably
    assert min(delta_e(a, b) for a in PALETTE[16:] for b in PALETTE[:16]) > 5


def test_every_colour_reads_on_light_and_dark_backgrounds() -> None:
    for colour in PALETTE:
        assert contrast_ratio(colour, WHITE) >= 3.0, colour
        assert contrast_ratio(colour, STREAMLIT_DARK) >= 2.0, colour
        # a label on the colour: the chosen text colour is legible (WCAG AA for large text)
        assert contrast_ratio(colour, text_colour_on(colour)) >= 3.0, colour


def test_colour_is_a_fixed_function_of_the_name() -> None:
    assert [colour_for(n) for n in NAMES[:16]] == list(PALETTE[:16])
    assert colour_for("ada") == colour_for("ada")
    # an external member's client id gets a stable palette colour too
    assert colour_for("someone-else") == colour_for("someone-else")
    assert colour_for("someone-else") in PALETTE
    assert contrast_ratio("#000000", WHITE) == pytest.approx(21.0)
    assert luminance(WHITE) == pytest.approx(1.0)
