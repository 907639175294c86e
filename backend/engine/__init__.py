"""Spark: the embedded Spark Connect server and the one session factory every replica uses."""
