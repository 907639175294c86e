"""Replica names and colours: stable, unique, readable for 16+ replicas."""

from __future__ import annotations

import itertools

import pytest

from backend.pool.names import (
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
from dashboard.theme import UNOWNED

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


def test_palette_is_large_and_distinct() -> None:
    assert len(PALETTE) >= 16
    assert len(set(PALETTE)) == len(PALETTE)


def _linear(c: str) -> tuple[float, float, float]:
    def lin(u: float) -> float:
        return u / 12.92 if u <= 0.04045 else ((u + 0.055) / 1.055) ** 2.4

    return tuple(lin(int(c[i:i + 2], 16) / 255) for i in (1, 3, 5))  # type: ignore[return-value]


def _lab(c: str, vision: str = "normal") -> tuple[float, float, float]:
    """sRGB hex -> CIE L*a*b* (D65) as seen with `vision`, to measure how different two
    colours look to someone: dichromacy simulated by Machado, Oliveira and Fernandes (2009),
    severity 1, applied in linear RGB."""
    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    r, g, b = _linear(c)
    if vision != "normal":
        m = DICHROMACY[vision]
        r, g, b = (min(1.0, max(0.0, row[0] * r + row[1] * g + row[2] * b)) for row in m)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


DICHROMACY = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216),
                   (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413),
                     (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602),
                   (0.004733, 0.691367, 0.303900)),
}


def _delta_e(a: str, b: str, vision: str = "normal") -> float:
    return sum((p - q) ** 2 for p, q in zip(_lab(a, vision), _lab(b, vision),
                                            strict=True)) ** 0.5


@pytest.mark.parametrize("vision", ["normal", *DICHROMACY])
def test_a_small_fleets_colours_stay_apart_for_colour_blind_eyes(vision: str) -> None:
    """The first eight owners (and the unowned grey) are told apart in normal vision and with
    each kind of dichromacy; the simulation itself moves red and green onto one another."""
    eight = [*PALETTE[:8], UNOWNED]
    closest = min(_delta_e(a, b, vision) for a, b in itertools.combinations(eight, 2))
    assert closest > 20, (vision, closest)
    if vision in ("protanopia", "deuteranopia"):  # the simulation does what it says
        assert _delta_e("#dc2626", "#16a34a", vision) < _delta_e("#dc2626", "#16a34a") / 2


def test_first_16_colours_are_far_apart() -> None:
    """No two of the first 16 replicas get colours that are hard to tell apart (CIE76)."""
    closest = min(_delta_e(a, b) for a, b in itertools.combinations(PALETTE[:16], 2))
    assert closest > 18, closest
    # the rest only need to differ from every one of the first 16 noticeably
    assert min(_delta_e(a, b) for a in PALETTE[16:] for b in PALETTE[:16]) > 5


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
