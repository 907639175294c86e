"""Spark's client side: the Spark Connect session factory a replica uses. It starts no JVM,
so a replica never loads what runs the engine (backend/engine)."""
