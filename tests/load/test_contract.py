"""The engine is the one source of truth for specs and results: Python validates with the
engine's rules, and its models hold exactly the keys the engine writes."""

from __future__ import annotations

import ast
import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import pywebbench
from pydantic import BaseModel
from pywebbench import _engine
from pywebbench.load import LoadProgress, LoadResult, LoadSpec, run_load

URL = "http://127.0.0.1:9/"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"connections": 0}, "connections: must be >= 1"),
        ({"connections": -3}, "connections: invalid value"),
        ({"connections": "64"}, "connections: invalid type"),
        ({"duration_s": -1.0}, "duration_s: must be > 0"),
        ({"duration_s": float("inf")}, "duration_s: inf is not a JSON value"),
        ({"rate": 0.0}, "rate: must be > 0"),
        ({"rate": "fast"}, "rate: invalid type"),
        ({"url": "ftp://127.0.0.1/"}, "url: "),
        ({"url": "http://127.0.0.1:0/"}, "url: port 0"),
        ({"threads": 2, "connections": 1}, "threads: 2 threads for 1 connections"),
        ({"conections": 8}, "conections: unknown load spec field"),
        ({"cpus": [5000]}, "cpus: cpu 5000 is out of range"),
        ({"arrival": "bursty"}, "arrival: unknown variant"),
        ({"faults": [{"kind": "no-such-fault"}]}, "faults: "),
    ],
)
def test_validation_errors_are_one_line_naming_the_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as caught:
        LoadSpec(**{"url": URL, **fields})
    text = str(caught.value)
    assert text.startswith(message) and "\n" not in text, text
    if "JSON value" not in message:  # the binding says the same about the raw document
        with pytest.raises(ValueError, match="^" + message.split(":")[0] + ": "):
            _engine.spec_validate(json.dumps({"url": URL, **fields}))


def test_python_defaults_are_the_engines() -> None:
    engine = json.loads(_engine.spec_validate(json.dumps({"url": URL})))
    assert LoadSpec(url=URL).to_dict() == engine
    # The declared defaults (what type checkers and readers see) match too.
    for name, field in LoadSpec.model_fields.items():
        if field.is_required():
            continue
        # The engine leaves these out when empty.
        absent = {
            "body": b"",
            "faults": [],
            "start_at_unix_ns": None,
            "source_addresses": [],
            "unix_socket": None,
            "rate_phases": [],
            "fresh_share": 0.0,
            "requests_per_connection": 0,
            "message_bytes": 64,
            "mix": [],
        }
        want = engine[name] if name in engine else absent[name]
        got = [list(h) for h in field.default] if name == "headers" else field.default
        assert got == want, name
    spec = LoadSpec(url=URL, duration_s=2, headers=(("X-A", "1"),), body="é")
    assert spec.duration_s == 2.0 and spec.headers == [("X-A", "1")] and spec.body == "é".encode()


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (``M``, ``M | None``, ``list[M]``,
    ``dict[str, M]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _items(annotation: Any, value: Any) -> list[Any]:
    """The parts of ``value`` that an annotation's models describe."""
    if value is None:
        return []
    origin = typing.get_origin(annotation)
    if origin is list:
        return list(value)
    if origin is dict:
        return list(value.values())
    return [value]


def _assert_model_matches(model: type[BaseModel], doc: Any, where: str) -> None:
    """Every key the model expects is in the engine's document, recursively."""
    if model is LoadSpec:
        return  # the spec is checked against the engine by test_python_defaults_are_the_engines
    assert isinstance(doc, dict), where
    # Written only when a spec has faults, or protocol ws (tests/load/test_ws.py parses those).
    # A mix's endpoints: tests/load/test_mix_engine.py reads a real one.
    optional = {"faults", "websocket", "endpoints"} if model is LoadResult else set()
    missing = set(model.model_fields) - set(doc) - optional
    assert not missing, f"{where}: the model expects keys the engine does not write: {missing}"
    for name, field in model.model_fields.items():
        for sub in _models_in(field.annotation):
            for item in _items(field.annotation, doc.get(name)):
                _assert_model_matches(sub, item, f"{where}.{name}")


@pytest.fixture(scope="module")
def engine_document(refserver) -> dict[str, Any]:
    """A real result with every optional part present: open loop (service time, schedule lag,
    open-loop figures), a warm-up, and an error class (every response fails the check)."""
    spec = LoadSpec(
        url=refserver.url + "/hello",
        connections=4,
        rate=200.0,
        warmup_s=0.2,
        duration_s=1.2,
        expect_status=[201],
    )
    doc: dict[str, Any] = json.loads(_engine.run_load(spec.to_json()))
    return doc


def test_model_reads_a_real_result_exactly(engine_document: dict[str, Any]) -> None:
    doc = engine_document
    for part in ("service_time", "schedule_lag", "open_loop", "warmup"):
        assert doc[part] is not None, part
    assert doc["error_classes"]["check_failed"]["count"] == doc["requests"] > 0
    result = LoadResult.from_dict(doc)
    assert result.mode == "open" and result.open_loop is not None
    assert result.error_classes["check_failed"].count == result.requests
    assert result.per_second and result.generator.threads
    # Nothing lost, nothing invented: the model writes back the engine's document.
    assert result.to_dict() == doc
    assert LoadResult.from_json(result.to_json()) == result


def test_model_expects_no_key_the_engine_does_not_write(engine_document: dict[str, Any]) -> None:
    _assert_model_matches(LoadResult, engine_document, "result")
    with pytest.raises(ValueError, match="extra"):  # and refuses keys it does not know
        LoadResult.from_dict({**engine_document, "requests_per_s": 1.0})
    with pytest.raises(ValueError, match="requests"):
        LoadResult.from_dict({k: v for k, v in engine_document.items() if k != "requests"})


def test_progress_model_is_the_engines_snapshot(refserver) -> None:
    raw: list[dict[str, Any]] = []
    _engine.run_load(
        LoadSpec(url=refserver.url + "/hello", connections=1, duration_s=0.3).to_json(),
        lambda text: raw.append(json.loads(text)),
        0.05,
    )
    assert raw
    assert set(LoadProgress.model_fields) - {"rps"} == set(raw[0])
    seen: list[LoadProgress] = []
    run_load(
        LoadSpec(url=refserver.url + "/hello", connections=1, duration_s=0.3),
        seen.append,
        interval_s=0.05,
    )
    assert seen and all(p.rps >= 0 for p in seen)


def test_stub_covers_the_compiled_module() -> None:
    stub = Path(pywebbench.__file__).parent / "_engine.pyi"
    tree = ast.parse(stub.read_text())
    declared = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    exposed = {
        name
        for name in dir(_engine)
        if not name.startswith("_")
        and isinstance(getattr(_engine, name), types.BuiltinFunctionType | type)
    }
    assert declared == exposed
    assert _engine.__version__ == pywebbench.__version__
