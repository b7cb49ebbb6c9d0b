import os

import pytest

pytest_plugins = ["pytester"]

# pytester clears PYTEST_ADDOPTS for the pytest runs it makes; the options this run was given
# there (the suite's: plugins of the venv these tests do not use, such as LangSmith's, whose
# import takes 1.8 s of CPU) reach those runs too.
ADDOPTS = os.environ.get("PYTEST_ADDOPTS")


@pytest.fixture
def pytester(pytester, monkeypatch):
    if ADDOPTS:
        monkeypatch.setenv("PYTEST_ADDOPTS", ADDOPTS)
    return pytester
