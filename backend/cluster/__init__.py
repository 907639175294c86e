"""Kafka's client side: how to reach any cluster (settings, client.properties), our admin
clients, topics, group descriptions and murmur2. Running Kafka is backend/kafkanode's."""
