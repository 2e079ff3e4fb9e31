"""The CLI's signal handling: SIGINT/SIGTERM become a CancelToken (first:
stop new work; second: roll back), previous handlers come back, and the exit
code is 128 + the signal."""

from __future__ import annotations

import os
import signal

import click
import pytest

from bmaas.cli.interrupt import exit_if_interrupted, interruptible
from bmaas.provision import CancelToken, Interrupted, exit_code_for


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_cancels_the_token_and_sets_the_exit_code(sig: int, code: int) -> None:
    before = signal.getsignal(sig)
    with interruptible() as token:
        os.kill(os.getpid(), sig)  # handled at the next bytecode, in this thread
        assert token.cancelled
        assert not token.roll_back
        token.check(in_flight=True)  # work in flight goes on
        with pytest.raises(Interrupted, match=signal.Signals(sig).name):
            token.check()  # new work does not start
        os.kill(os.getpid(), sig)
        assert token.roll_back
        with pytest.raises(Interrupted):
            token.check(in_flight=True)
    assert signal.getsignal(sig) is before
    assert exit_code_for(token) == code
    with pytest.raises(click.exceptions.Exit) as info:
        exit_if_interrupted(click.Context(click.Command("x")), token)
    assert info.value.exit_code == code


def test_no_signal_no_exit() -> None:
    token = CancelToken()
    exit_if_interrupted(click.Context(click.Command("x")), token)
    token.cancel("by code")
    assert exit_code_for(token) is None
    exit_if_interrupted(click.Context(click.Command("x")), token)
