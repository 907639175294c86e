"""Talking to Kafka, any cluster: how to reach it (settings, client.properties), our admin
clients, topics, group descriptions, murmur2, the pinned release's jars, and every read
through Kafka's Java Admin (`javaadmin/`). Running Kafka is backend/broker's."""
