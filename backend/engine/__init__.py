"""Running Spark: the embedded Spark Connect server, its standalone master and workers and
its class-data archive. The session a client opens and the engine's REST API are
backend/spark's, which this package uses."""
