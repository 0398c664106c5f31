"""A Ctrl-C that reaches `leasehold dev` while it starts stops it once started: before, the
signal handler was installed only after the banner, so a SIGINT during the start ended it with
a KeyboardInterrupt traceback halfway (seen in an e2e test that stopped a runtime at once)."""

from __future__ import annotations

import os
import signal

from leasehold.local.options import RuntimeOptions
from leasehold.local.runtime import Runtime


def test_a_sigint_while_the_signals_are_caught_is_noted_not_raised() -> None:
    runtime = Runtime(RuntimeOptions(state_dir=None))
    before = signal.getsignal(signal.SIGINT)
    with runtime.signals() as signalled:
        os.kill(os.getpid(), signal.SIGINT)  # as if it came during runtime.start()
        assert signalled.wait(5)
    assert signal.getsignal(signal.SIGINT) is before
