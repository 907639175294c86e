"""The headless overview: Prometheus /metrics and alert rules for every group of a cluster."""
