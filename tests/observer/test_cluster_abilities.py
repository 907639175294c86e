"""What a cluster can do, from the features it finalized: its release, and the group types it
cannot have, each said in one plain line (pure)."""

from __future__ import annotations

import pytest

from backend.contracts.overview import RELEASE_FROM_LEVEL, kafka_release, lacking


@pytest.mark.parametrize(("level", "release"), [
    (None, None), (6, None), (7, "3.3"), (11, "3.5"), (21, "3.9"), (22, "4.0"), (25, "4.0"),
    (27, "4.1"), (30, "4.3"), (31, "4.3 or later")])
def test_the_release_comes_from_metadata_version(level: int | None, release: str | None) -> None:
    finalized = {} if level is None else {"metadata.version": level}
    assert kafka_release(finalized) == release


def test_the_table_is_in_order_and_names_each_release_once() -> None:
    levels = [level for level, _ in RELEASE_FROM_LEVEL]
    names = [name for _, name in RELEASE_FROM_LEVEL]
    assert levels == sorted(levels) and len(set(names)) == len(names)


@pytest.mark.parametrize(("finalized", "lines"), [
    ({"metadata.version": 21},  # Kafka 3.9
     ("share groups need Kafka 4.1 or later (this cluster runs Kafka 3.9)",
      "streams groups need Kafka 4.1 or later (this cluster runs Kafka 3.9)")),
    ({}, ("share groups need Kafka 4.1 or later", "streams groups need Kafka 4.1 or later")),
    ({"metadata.version": 27, "streams.version": 1},  # 4.1 with share groups not turned on
     ("share groups are off on this cluster (its share.version feature is not enabled)",)),
    ({"metadata.version": 30, "share.version": 1, "streams.version": 1, "group.version": 1}, ()),
])
def test_each_missing_group_type_is_one_plain_line(finalized: dict[str, int],
                                                   lines: tuple[str, ...]) -> None:
    assert lacking(finalized) == lines
