"""Talking to Spark, any engine: the Spark Connect session factory a replica uses and the
engine's REST API (executors). It starts no JVM, so a client never loads what runs the
engine (backend/engine)."""
