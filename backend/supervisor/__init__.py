"""Replica process control and the control API."""
