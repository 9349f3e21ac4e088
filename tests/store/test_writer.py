"""The store-writer protocol names its operations once (``STORE_OPERATIONS``): the protocol,
the store and the Ray relay's stand-in all have exactly those, and the Ray driver runs no
other method a task asks for."""

from __future__ import annotations

import inspect
from pathlib import Path

from pywebbench.run.ray_executor import store_reply
from pywebbench.run.relay import RemoteStore
from pywebbench.store import STORE_OPERATIONS, Store, StoreWriter


def _operations(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")}


def test_the_protocol_the_store_and_the_relay_have_the_listed_operations() -> None:
    assert len(set(STORE_OPERATIONS)) == len(STORE_OPERATIONS)
    assert _operations(StoreWriter) == set(STORE_OPERATIONS)
    assert _operations(RemoteStore) == set(STORE_OPERATIONS)
    for name in STORE_OPERATIONS:
        ours = inspect.signature(getattr(StoreWriter, name))
        assert inspect.signature(getattr(Store, name)) == ours, name
        assert inspect.signature(getattr(RemoteStore, name)) == ours, name


def test_the_ray_driver_runs_only_store_operations(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        assert store_reply(store, "cells", ("no-such-run",), {}) == ("ok", [])
        for refused, args in (("close", ()), ("load_study", ((),)), ("_select", ())):
            status, error = store_reply(store, refused, args, {})
            assert status == "error" and "is not a store operation" in str(error), refused
        assert store.cells("no-such-run") == []  # still open: close was not run
