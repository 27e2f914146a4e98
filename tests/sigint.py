"""Signal set-up for tests that interrupt the processes they start."""

from __future__ import annotations

import signal


def ctrl_c_as_in_a_terminal() -> None:
    """``preexec_fn`` of a child that a test interrupts: a test session started in the
    background by a shell without job control (as a CI may be) inherits SIGINT ignored, and
    so would every process it starts; the child gets the default back, as in a terminal
    (Python then installs its KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
