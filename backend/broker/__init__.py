"""Running Kafka: the embedded KRaft node, a cluster of them and the nodes' class-data
archive. How to talk to a cluster (and Kafka's jars) is backend/kafka's, which this uses."""
