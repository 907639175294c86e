"""The replica pool's events as the memory's actions: which are one, and what each says."""

from __future__ import annotations

import pytest

from backend.contracts.history import Action
from backend.supervisor.memory import replica_action


def event(action: str, **extra) -> dict:
    return {"ts": 12.5, "replica": "ada", "action": action, "pid": 42, **extra}


@pytest.mark.parametrize("ev,by,expected", [
    (event("kill"), "presenter", Action(12_500, "g", "ada", "kill")),
    (event("stop"), "presenter", Action(12_500, "g", "ada", "stop")),
    (event("stop", via="scale"), "presenter", Action(12_500, "g", "ada", "scale-down")),
    (event("start", via="scale"), "presenter", Action(12_500, "g", "ada", "scale-up")),
    (event("start", via="scale"), "up", Action(12_500, "g", "ada", "start", by="up")),
    (event("start"), "presenter", Action(12_500, "g", "ada", "start")),
    (event("restart"), "presenter", Action(12_500, "g", "ada", "restart")),
    (event("start", via="restart"), "presenter", None),  # the restart's second half
    (event("start", via="scale"), "up-restart",
     Action(12_500, "g", "ada", "restart", by="up-restart")),
    (event("exit", returncode=3, state="crashed"), "presenter",
     Action(12_500, "g", "ada", "crash", exit_code=3, by="supervisor")),
    (event("exit", returncode=-9, state="killed"), "presenter", None),
    (event("exit", returncode=0, state="stopped"), "presenter", None),
    (event("forced"), "presenter", None),
    (event("shutdown"), "presenter", None),
], ids=lambda v: str(v) if not isinstance(v, dict) else v["action"] + str(v.get("via", "")))
def test_each_pool_event_is_the_action_it_means(ev, by, expected):
    assert replica_action("g", ev, by) == expected
