"""The Kafka reading layer: every read of a cluster, through Kafka's Java Admin (reader.py)."""
