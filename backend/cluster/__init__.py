"""Kafka: the embedded broker's lifecycle and the connection settings for any cluster."""
