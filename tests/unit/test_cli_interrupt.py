"""The CLI's signal handling: SIGINT/SIGTERM become a CancelToken (first:
stop new work; second: roll back), previous handlers come back, and the exit
code is 128 + the signal."""

from __future__ import annotations

import os
import signal
import threading

import click
import pytest

from bmaas.cli.interrupt import (
    exit_if_interrupted,
    exit_on_signals,
    interruptible,
    relayed_signals,
)
from bmaas.provision import CancelToken, Interrupted, exit_code_for


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_cancels_the_token_and_sets_the_exit_code(sig: int, code: int) -> None:
    before = signal.getsignal(sig)
    with interruptible() as token:
        os.kill(os.getpid(), sig)  # the handler writes to the relay's pipe
        assert token.wait(10)  # ... whose thread cancels the token (returns at once)
        assert not token.roll_back
        token.check(in_flight=True)  # work in flight goes on
        with pytest.raises(Interrupted, match=signal.Signals(sig).name):
            token.check()  # new work does not start
        os.kill(os.getpid(), sig)
        assert token.wait(10, in_flight=True)
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


def test_a_signal_never_deadlocks_the_thread_it_interrupts() -> None:
    """A handler runs in the main thread between two bytecodes; one that set
    an Event (or took the token's lock) while the main thread held that lock
    hung for good (``sync --interval``, 1 run in 7). Here the main thread holds
    both when the signal lands: the handler only writes to a pipe."""
    stop = threading.Event()
    with relayed_signals(lambda _signum: stop.set()), interruptible() as token:
        with token._lock, stop._cond:  # what a handler taking locks would block on
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs somewhere in here
                pass
        assert token.wait(10)
    assert not stop.is_set()  # the inner relay (interruptible) had the signal


def test_relayed_signals_restores_handlers_and_stops_its_thread() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[int] = []
    with relayed_signals(seen.append):
        os.kill(os.getpid(), signal.SIGTERM)
    assert seen == [signal.SIGTERM]  # read before the block returned
    assert signal.getsignal(signal.SIGTERM) is before
    assert not [t for t in threading.enumerate() if t.name == "bmaas-signals"]


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_while_connecting_a_signal_exits_at_once(
    sig: int, code: int, capfd: pytest.CaptureFixture[str]
) -> None:
    """Nothing has started while a command opens its database or reaches
    Ironic: the signal ends it there (cleanups run), instead of waiting out
    a silent service until the deadline."""
    before = signal.getsignal(sig)
    cleaned: list[bool] = []

    def connect() -> None:
        with exit_on_signals():
            try:
                os.kill(os.getpid(), sig)
                for _ in range(1000):  # the handler raises somewhere in here
                    pass
            finally:
                cleaned.append(True)

    with pytest.raises(SystemExit) as info:
        connect()
    assert info.value.code == code
    assert cleaned == [True]
    assert signal.getsignal(sig) is before
    assert "stopped while connecting; nothing was started" in capfd.readouterr().err
