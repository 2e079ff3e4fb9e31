"""How hwlab starts a Python process of its own: ``python -P``.

``python -c CODE`` and ``python -m MODULE`` put the current directory first
on ``sys.path``, so a ``bmaas/`` folder there -- the directory that holds a
clone of this repository, say -- is imported instead of the installed
package (issue 44: ``hwlab up`` run beside a clone failed in every worker
with ``cannot import name '__version__' from 'bmaas' (unknown location)``).

``-P`` (Python 3.11+) leaves the current directory (and a script's) off the
path and changes nothing else. ``-I`` would also drop the ``PYTHON*``
environment variables and the user's site directory, which the lab's users
rely on (a test's ``PYTHONPATH``, ``PYTHONWARNINGS``). ``multiprocessing``
passes ``-P`` on to the processes it spawns (the lab's workers, from the
daemon) and gives them the parent's ``sys.path``, so they start clean too.

Every ``sys.executable`` hwlab runs goes through :func:`python_argv`;
tests/unit/hwlab/test_pyexec.py holds the tree to that.
"""

from __future__ import annotations

import sys

__all__ = ["SAFE_PATH", "python_argv"]

#: the interpreter flag that keeps the current directory off ``sys.path``
SAFE_PATH = "-P"


def python_argv(*args: str, python: str | None = None) -> list[str]:
    """The command line of a Python process of ours: ``python -P ARGS``
    (``python``: another interpreter, a separate venv's; default this one)."""
    return [python or sys.executable, SAFE_PATH, *args]
