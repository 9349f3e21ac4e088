"""The apps inside a stack's virtualenv cannot import pywebbench (``inside/apps/pwb_common.py``
runs on PyPy 3.9 with the standard library only), so they keep their own copies of the
workload constants. These must stay equal to the catalogue's and the verifier's, which decide
what a correct answer is."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pywebbench
from pywebbench.catalogue import workloads
from pywebbench.verify import rules


def _pwb_common() -> ModuleType:
    path = pywebbench.__file__.replace("__init__.py", "inside/apps/pwb_common.py")
    spec = importlib.util.spec_from_file_location("pwb_common_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_apps_copies_of_workload_constants_equal_the_catalogues() -> None:
    app = _pwb_common()
    pairs = {
        "HELLO": (app.HELLO, workloads.HELLO_BODY),
        "MESSAGE": (app.MESSAGE, workloads.JSON_MESSAGE),
        "CPU_DEFAULT_N": (app.CPU_DEFAULT_N, workloads.WORKLOADS["cpu"].params["n"]),
        "CPU_MAX_N": (app.CPU_MAX_N, workloads.CPU_MAX_N),
        "IO_DEFAULT_MS": (app.IO_DEFAULT_MS, workloads.WORKLOADS["io"].params["ms"]),
        "IO_MAX_MS": (app.IO_MAX_MS, workloads.IO_MAX_MS),
        "REDIS_COUNTER_KEY": (app.REDIS_COUNTER_KEY, workloads.REDIS_COUNTER_KEY),
        "REDIS_VALUE_KEY": (app.REDIS_VALUE_KEY, workloads.REDIS_VALUE_KEY),
        "ADDITIONAL_FORTUNE": (app.ADDITIONAL_FORTUNE, workloads.ADDITIONAL_FORTUNE),
        "ENVIRON_MIN_BYTES": (app.ENVIRON_MIN_BYTES, rules.ENVIRON_MIN),
    }
    differ = {name: pair for name, pair in pairs.items() if pair[0] != pair[1]}
    assert not differ, f"inside/apps/pwb_common.py differs from the catalogue: {differ}"
