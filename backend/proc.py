"""Child-process hygiene shared by every launcher: children never outlive their parent."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM):
    """A `preexec_fn` asking Linux to signal the child when the spawning thread exits.

    Covers the case no handler can: the parent being SIGKILLed. Spawn from a long-lived
    thread (the main thread), because the signal follows the thread, not the process.
    """

    def _preexec() -> None:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        except OSError:
            pass  # not Linux: the parent's own cleanup still applies

    return _preexec
