"""`groupscope chaos`: crash, stop, start and scale replicas under load; prove nothing was lost.

schedule (what to do when) → run (do it to real replica processes, watch with the observer)
→ verify (read every stream's Summary and compare with what the fleet produced) → report.
"""
