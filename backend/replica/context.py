"""The streaming-context API: user code hears when a stream arrives and when streams leave.

A stream is *received* when its first message reaches this replica after its partition was
assigned, and *revoked* when that partition is revoked or lost (in the spirit of the Quix
Streams streaming context). The built-in replica registers handlers that log exactly
`New stream received: car-04` and `Stream revoked: car-04`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

log = logging.getLogger("groupscope.replica")


@dataclass(frozen=True, order=True)
class Stream:
    """All messages with one key; lives in exactly one partition."""

    partition: int
    stream_id: str


ReceivedHandler = Callable[[Stream], None]
RevokedHandler = Callable[[list[Stream]], None]


class StreamingContext:
    """Tracks which streams this replica currently has, and calls the registered handlers."""

    def __init__(self) -> None:
        self._received: list[ReceivedHandler] = []
        self._revoked: list[RevokedHandler] = []
        self._active: dict[int, dict[bytes, Stream]] = {}

    def on_stream_received(self, handler: ReceivedHandler) -> ReceivedHandler:
        """Register `handler(stream)`; usable as a decorator."""
        self._received.append(handler)
        return handler

    def on_streams_revoked(self, handler: RevokedHandler) -> RevokedHandler:
        """Register `handler(streams)`; usable as a decorator."""
        self._revoked.append(handler)
        return handler

    def is_known(self, partition: int, key: bytes) -> bool:
        """Hot path: one dict lookup per message."""
        seen = self._active.get(partition)
        return seen is not None and key in seen

    def receive(self, partition: int, key: bytes) -> Stream:
        stream = Stream(partition, key.decode("utf-8", "replace"))
        self._active.setdefault(partition, {})[key] = stream
        for handler in self._received:
            handler(stream)
        return stream

    def revoke_partitions(self, partitions: Iterable[int]) -> list[Stream]:
        streams: list[Stream] = []
        for p in partitions:
            streams.extend(self._active.pop(p, {}).values())
        streams.sort()
        if streams:
            for handler in self._revoked:
                handler(streams)
        return streams

    def active_streams(self) -> list[Stream]:
        return sorted(s for seen in self._active.values() for s in seen.values())


def log_received(stream: Stream) -> None:
    log.info("New stream received: %s", stream.stream_id)


def log_revoked(streams: list[Stream]) -> None:
    for stream in streams:
        log.info("Stream revoked: %s", stream.stream_id)
