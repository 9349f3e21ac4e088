"""The fastapi framework: app module ``pwb_fastapi``."""

from __future__ import annotations

from pywebbench.catalogue.base import ASGI
from pywebbench.catalogue.frameworks._base import AppFramework
from pywebbench.catalogue.workloads import HTTP_WORKLOADS, WS_WORKLOADS


class FastAPI(AppFramework):
    """FastAPI with typed, validated query parameters; dicts serialised by FastAPI."""

    name = "fastapi"
    interface = ASGI
    free_threaded_unavailable = {
        "3.13": 'FastAPI needs pydantic-core, whose 3.13t build fails: "PyO3 does not support '
        'the free-threaded build of CPython versions below 3.14"'
    }
    app = "pwb_fastapi:app"
    workloads = HTTP_WORKLOADS | WS_WORKLOADS  # ws-echo too (docs/websocket.md)
    io_style = "async"
    system_packages = ("libpq5",)  # psycopg (async PostgreSQL client) loads libpq
    description = "FastAPI with typed, validated query parameters; dicts serialised by FastAPI."
    notes = (
        "On PyPy 3.9 pydantic-core must come from its last pp39 wheel (2.33.2): a source "
        "build needs PyPy >= 3.11, so it is installed with --only-binary pydantic-core."
    )
    pins = {
        "modern": ("fastapi==0.165.0",),
        "py39": ("fastapi==0.128.8", "pydantic==2.11.10", "pydantic-core==2.33.2"),
    }
    only_binary = ("pydantic-core",)


FRAMEWORK = FastAPI()
