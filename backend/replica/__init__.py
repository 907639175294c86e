"""The PySpark consumer: group membership, streaming context, Spark summaries, state."""
