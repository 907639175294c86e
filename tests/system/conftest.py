"""Fixtures the cross-cutting suites share with the packages' own (imported, so pytest
registers them here too)."""

from tests.kafka.javaadmin.conftest import streams_app_classpath

__all__ = ["streams_app_classpath"]
