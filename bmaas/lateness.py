"""The client's own lateness: how long a BMC call's thread waited for a CPU.

A timeout says "the BMC did not answer within the bound". That is only true
if the client was there to see the answer: a thread that is ready to run
(an answer arrived to be read, a request to be sent next) but gets no CPU
for a large part of the bound gives the BMC less than the bound, and may
see the deadline pass with the answer sitting in its socket. On a loaded
host (issue 50: a 2-core machine at load 18-25) a live BMC then looked
silent, and the power sync fenced it beside the dead one: the client
counted its own lateness against a live node.

Linux says how long a thread waited on a run queue (ready, not running):
the second field of ``/proc/thread-self/schedstat``, in nanoseconds. A
driver takes a :func:`mark` when a call starts; when the call ends in a
fault that says the BMC gave no answer (the policy table's "no answer"
column: a timeout, an unreachable BMC), :func:`judge` sets the fault's
``late`` to the seconds the thread waited for a CPU meanwhile, if that was
at least :data:`LATE_SHARE` of the call's bound. The policy table reads it
(:func:`bmaas.policy.policy_for`): such a fault is still a timeout (the
outcome is unknown; retried as one), but the sync does not count it and
nothing fences on it.

Measured beside 14 CPU burners (load 24, 2 cores), the power reads of a
sync with ``--bmc-timeout 0.2``: live BMCs' timeouts waited 0.05-0.26 s
for a CPU, the dead BMC's 0.01-0.07 s (its thread sleeps on a socket that
never answers; sleeping is not waiting for a CPU). Where the run-queue
figure is not available (not Linux), the call's overrun past its bound
stands in: a thread that saw its deadline late was not running at it.
Reading the figure costs an open, a read and a close (13 us), once per
call that starts, and once more for one that ends in a no-answer fault.
"""

from __future__ import annotations

import os

from bmaas.faults import BMCFault

__all__ = ["LATE_SHARE", "Mark", "judge", "mark", "run_queue_wait"]

#: the share of a call's bound its thread may wait for a CPU before a
#: no-answer fault is the client's own: the BMC then had at most three
#: quarters of the time it was promised
LATE_SHARE = 0.25

_SCHEDSTAT = "/proc/thread-self/schedstat"


def run_queue_wait() -> float | None:
    """Seconds the calling thread has waited on a run queue since it began
    (ready to run, given no CPU); None where the system does not say. The
    file is opened and closed each time: a descriptor kept per thread would
    outlive every call (and a lab test's check for leaked descriptors)."""
    try:
        fd = os.open(_SCHEDSTAT, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return int(os.read(fd, 128).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None
    finally:
        os.close(fd)


#: what :func:`mark` returns: the thread's run-queue wait at the call's start
Mark = float | None


def mark() -> Mark:
    """Taken when a BMC call starts, in the thread that makes it."""
    return run_queue_wait()


def judge(fault: BaseException, since: Mark, bound: float, *, elapsed: float | None) -> None:
    """Set ``fault.late`` when the call (started at ``since``, given
    ``bound`` seconds, ``elapsed`` so far) ended in a no-answer fault
    while its thread waited for a CPU at least :data:`LATE_SHARE` of
    ``bound``. Anything else is left as it is."""
    from bmaas.policy import policy_for  # the table imports the faults this reads

    if not isinstance(fault, BMCFault) or bound <= 0 or not policy_for(type(fault)).no_answer:
        return
    now = run_queue_wait() if since is not None else None
    if now is not None and since is not None:
        waited = now - since
    elif elapsed is not None:  # no run-queue figure: the overrun past the bound
        waited = elapsed - bound
    else:
        return
    if waited >= LATE_SHARE * bound:
        fault.late = round(waited, 3)
