"""Kafka's runtime: the embedded KRaft node, a cluster of them, Kafka's jars and the nodes'
class-data archive. How to talk to a cluster is backend/cluster's, which this package uses."""
