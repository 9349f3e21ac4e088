"""The export registry (pywebbench.export): one module per format, each registered once under
its ``--format`` name, and ``pywebbench export`` offers exactly those formats. What each
format writes is tested end to end in tests/store/test_store.py (JSON, CSV),
tests/store/test_mix_endpoints.py, tests/compare/test_interop_exports.py (pyperf, .hlog)
and tests/reference/test_reference_record.py (reference records)."""

from __future__ import annotations

import importlib
import pkgutil

import click
import pywebbench.export
from pywebbench.commands.export import command
from pywebbench.export import EXPORTERS


def test_every_format_module_is_registered_once_under_its_name() -> None:
    modules = {
        m.name
        for m in pkgutil.iter_modules(pywebbench.export.__path__)
        if m.name != "base" and not m.name.startswith("_")
    }
    assert set(EXPORTERS) == modules
    for name, exporter in EXPORTERS.items():
        module = importlib.import_module(f"pywebbench.export.{name}")
        assert exporter.name == name and exporter.write is module.write


def test_the_command_offers_exactly_the_registered_formats() -> None:
    option = next(p for p in command.params if p.name == "fmt")
    assert isinstance(option.type, click.Choice)
    formats = ["json", "csv", "pyperf", "hdr", "reference"]
    assert list(option.type.choices) == list(EXPORTERS) == formats
    assert [n for n, e in EXPORTERS.items() if e.directory] == ["hdr", "reference"]
