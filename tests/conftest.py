"""Session-wide fixtures; the servers behind them, and skip-or-fail, are in tests/services.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests import services


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[services.S3Server]:
    """A SeaweedFS ``weed mini`` with one bucket, answering S3 on a free port of 127.0.0.1."""
    yield from services.s3_server(tmp_path_factory.mktemp("seaweedfs"))
