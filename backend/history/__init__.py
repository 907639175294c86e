"""The memory: every group's rebalance episodes with their causes and impact, its state
changes and its lag, kept for days in an embedded store (docs/architecture.md, "The memory").

`frames` reduces a description to what the tracker compares; `episodes` tells episodes and
their impact; `causes` names why, rule by rule; `store` is the abstract memory and `sqlite`
its backend; `recorder` feeds it from a watcher without ever making the watcher wait.
"""
