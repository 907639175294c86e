"""Spark's server side: the embedded Spark Connect server, its standalone master and workers,
its executors (Spark's REST API) and its class-data archive. The session a client opens is
backend/sparkclient's, which this package uses."""
