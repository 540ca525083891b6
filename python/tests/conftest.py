"""Shared pytest set-up: inductor's compile caches go to a directory of this session, removed at its
end (by default they pile up in /tmp/torchinductor_<user>, hundreds of MB per run)."""
import os
import shutil
import tempfile

import pytest


@pytest.fixture(scope="session", autouse=True)
def _inductor_cache_of_this_session():
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        yield
        return
    path = tempfile.mkdtemp(prefix="collmm-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    try:
        yield
    finally:
        del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        shutil.rmtree(path, ignore_errors=True)
