"""`groupscope lab`: the rebalance protocols side by side on one topic, measured live.

run (one topic, a group per protocol of real replicas, one event to all at once) → tail (the
batches each group processed, from its summaries changelog) → measure (the scoreboard, pure)
→ report (median and spread over repetitions).
"""
