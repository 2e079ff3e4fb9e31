"""Fixtures every test folder may use: ``pg_server`` (a real PostgreSQL,
started once per session, see :mod:`tests.pgserver`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import pgserver


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin URL of a running PostgreSQL (tests using it are marked ``pg``)."""
    with pgserver.server() as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    with pgserver.fresh_database(pg_server) as url:
        yield url
