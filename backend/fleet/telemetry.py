"""A small, deterministic car model: smooth speed, consistent gear and rpm, warming engine, GPS.

Gear and rpm are pure functions of speed (`gear_for_speed`, `rpm_for`), so anyone can check a
produced message for physical consistency. Speed follows a per-car target (cruise, slow down,
stop at a light) with bounded acceleration; position advances by speed × time along a closed
route of waypoints, interpolated; the engine warms toward its working temperature with a
first-order lag plus a little heat from load. Each car has its own seeded RNG, so a run is
reproducible given the same timestamps.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# ---- drivetrain (a generic 6-speed hatchback) ---------------------------------------------

IDLE_RPM = 800.0
MAX_RPM = 6500.0
FINAL_DRIVE = 3.7
WHEEL_CIRCUMFERENCE_M = 2.0
GEAR_RATIOS: tuple[float, ...] = (3.6, 2.1, 1.4, 1.0, 0.8, 0.65)
# upshift points in km/h: gear g is used from UPSHIFT_KMH[g-1] (gear 1 from 1 km/h)
UPSHIFT_KMH: tuple[float, ...] = (1.0, 20.0, 35.0, 55.0, 75.0, 95.0)
MAX_SPEED_KMH = 180.0


def gear_for_speed(speed_kmh: float) -> int:
    """0 (neutral, standing) below 1 km/h, else the highest gear whose upshift point is reached."""
    gear = 0
    for g, threshold in enumerate(UPSHIFT_KMH, start=1):
        if speed_kmh >= threshold:
            gear = g
    return gear


def rpm_for(speed_kmh: float, gear: int) -> float:
    """Engine rpm from wheel speed through the gear and final drive; idle when it would stall."""
    if gear <= 0:
        return IDLE_RPM
    wheel_rpm = speed_kmh * 1000.0 / 60.0 / WHEEL_CIRCUMFERENCE_M
    return min(MAX_RPM, max(IDLE_RPM, wheel_rpm * GEAR_RATIOS[gear - 1] * FINAL_DRIVE))


# ---- route ---------------------------------------------------------------------------------

# A closed loop (≈ 11 km) around a city centre; the first point is repeated implicitly.
ROUTE: tuple[tuple[float, float], ...] = (
    (52.3791, 4.9003), (52.3838, 4.8830), (52.3780, 4.8645), (52.3660, 4.8602),
    (52.3572, 4.8690), (52.3518, 4.8885), (52.3556, 4.9080), (52.3630, 4.9225),
    (52.3725, 4.9210), (52.3770, 4.9120),
)
_EARTH_M = 6_371_000.0


def _distance_m(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Equirectangular distance: exact enough over a few km, and cheap."""
    lat = math.radians((a[0] + b[0]) / 2)
    dx = math.radians(b[1] - a[1]) * math.cos(lat)
    dy = math.radians(b[0] - a[0])
    return _EARTH_M * math.hypot(dx, dy)


@dataclass(frozen=True)
class Route:
    """A closed polyline with cumulative distances, for position lookup by distance."""

    points: tuple[tuple[float, float], ...] = ROUTE
    cumulative: tuple[float, ...] = field(init=False)

    def __post_init__(self) -> None:
        if len(self.points) < 2:
            raise ValueError("a route needs at least two waypoints")
        total = 0.0
        cum = [0.0]
        for i in range(len(self.points)):
            total += _distance_m(self.points[i], self.points[(i + 1) % len(self.points)])
            cum.append(total)
        object.__setattr__(self, "cumulative", tuple(cum))

    @property
    def length_m(self) -> float:
        return self.cumulative[-1]

    def position(self, distance_m: float) -> tuple[float, float]:
        """Linear interpolation between the waypoints around `distance_m` (wraps around)."""
        d = distance_m % self.length_m
        lo, hi = 0, len(self.points) - 1
        while lo < hi:  # last segment start <= d
            mid = (lo + hi + 1) // 2
            if self.cumulative[mid] <= d:
                lo = mid
            else:
                hi = mid - 1
        a = self.points[lo]
        b = self.points[(lo + 1) % len(self.points)]
        seg = self.cumulative[lo + 1] - self.cumulative[lo]
        f = (d - self.cumulative[lo]) / seg if seg else 0.0
        return a[0] + (b[0] - a[0]) * f, a[1] + (b[1] - a[1]) * f


DEFAULT_ROUTE = Route()

# ---- the car ---------------------------------------------------------------------------------

ACCEL_MS2 = 2.0
BRAKE_MS2 = 3.5
WARM_C = 90.0
WARMUP_TAU_S = 90.0
MAX_STEP_S = 5.0  # a long pause (rate 0) does not teleport the car
TARGETS_KMH: tuple[float, ...] = (0.0, 30.0, 50.0, 50.0, 70.0, 90.0, 110.0, 130.0)


@dataclass
class Car:
    """State of one simulated car; `step(ts_ms)` advances it to that time and returns a reading."""

    stream_id: str
    rng: random.Random
    route: Route = DEFAULT_ROUTE
    distance_m: float = 0.0
    speed_kmh: float = 0.0
    target_kmh: float = 50.0
    hold_s: float = 0.0  # time left before a new target is chosen
    engine_temp_c: float = 20.0
    last_ms: int | None = None

    @classmethod
    def create(cls, stream_id: str, start_fraction: float = 0.0,
               route: Route = DEFAULT_ROUTE) -> Car:
        """A cold car at `start_fraction` of the way round the route, with its own seeded RNG."""
        rng = random.Random(f"groupscope-fleet:{stream_id}")
        return cls(stream_id=stream_id, rng=rng, route=route,
                   distance_m=route.length_m * (start_fraction % 1.0),
                   target_kmh=rng.choice(TARGETS_KMH[1:]),
                   hold_s=rng.uniform(5.0, 20.0),
                   engine_temp_c=rng.uniform(12.0, 24.0))

    def step(self, ts_ms: int) -> tuple[float, int, float, float, float, float]:
        """Advance to `ts_ms`; return (speed_kmh, gear, rpm, engine_temp_c, lat, lon), rounded.

        Gear and rpm are computed from the rounded speed so the published numbers satisfy
        `gear == gear_for_speed(speed)` and `rpm == round(rpm_for(speed, gear), 1)` exactly.
        """
        dt = 0.0 if self.last_ms is None else max(0.0, (ts_ms - self.last_ms) / 1000.0)
        dt = min(dt, MAX_STEP_S)
        self.last_ms = ts_ms
        if dt > 0.0:
            self._drive(dt)
        speed = round(self.speed_kmh, 2)
        gear = gear_for_speed(speed)
        rpm = round(rpm_for(speed, gear), 1)
        self._warm(dt, rpm)
        lat, lon = self.route.position(self.distance_m)
        return speed, gear, rpm, round(self.engine_temp_c, 2), round(lat, 6), round(lon, 6)

    def _drive(self, dt: float) -> None:
        self.hold_s -= dt
        if self.hold_s <= 0.0:
            self.target_kmh = self.rng.choice(TARGETS_KMH)
            # a stop at a light is short; cruising lasts longer
            self.hold_s = self.rng.uniform(3.0, 8.0) if self.target_kmh == 0 else \
                self.rng.uniform(10.0, 40.0)
        diff = self.target_kmh - self.speed_kmh
        limit = (ACCEL_MS2 if diff > 0 else BRAKE_MS2) * 3.6 * dt
        change = max(-limit, min(limit, diff))
        # small road noise while moving, never enough to make the trace jumpy
        noise = self.rng.gauss(0.0, 0.15) * math.sqrt(dt) if self.speed_kmh > 5 else 0.0
        old = self.speed_kmh
        self.speed_kmh = max(0.0, min(MAX_SPEED_KMH, self.speed_kmh + change + noise))
        self.distance_m += (old + self.speed_kmh) / 2.0 / 3.6 * dt

    def _warm(self, dt: float, rpm: float) -> None:
        if dt <= 0.0:
            return
        target = WARM_C + 4.0 * max(0.0, rpm - IDLE_RPM) / (MAX_RPM - IDLE_RPM)
        self.engine_temp_c += (target - self.engine_temp_c) * (1.0 - math.exp(-dt / WARMUP_TAU_S))
