"""Fixtures for the framework tests (helpers in ``apprunner.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from apprunner import env_for
from pywebbench.catalogue.base import Interpreter
from pywebbench.provision.services import start_services
from pywebbench.provision.venv import ProvisionedEnv

_ENVS: dict[str, ProvisionedEnv] = {}


@pytest.fixture(scope="session")
def framework_env():
    """``framework_env(interpreter)``: the provisioned all-frameworks venv (cached)."""

    def get(interpreter: Interpreter) -> ProvisionedEnv:
        if interpreter.path not in _ENVS:
            _ENVS[interpreter.path] = env_for(interpreter)
        return _ENVS[interpreter.path]

    return get


@pytest.fixture(scope="session")
def services(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Real redis-server and PostgreSQL for the whole session."""
    with start_services(["redis", "postgres"], tmp_path_factory.mktemp("services")) as env:
        assert env.database == "postgres", env.notes
        yield dict(env)
