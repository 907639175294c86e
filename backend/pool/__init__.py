"""Replica processes, run as a pool: start, kill, stop, restart, scale, a warm standby, and the
names and colours they go by. The supervisor runs the demo's pools, the lab one per group, the
chaos run its own."""
