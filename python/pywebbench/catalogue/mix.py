"""A traffic mix (docs/mix.md): the weighted requests a user's app is loaded with
(:class:`MixEntry`, the engine's own ``MixEntry``), and its file, TOML or JSON, read and
written back.

::

    [[request]]
    name = "GET /items/{id}"
    weight = 40
    path = "/items/17?full=1"

    [[request]]
    name = "POST /items"
    weight = 5
    method = "POST"
    path = "/items"
    headers = { "Content-Type" = "application/json" }
    body_file = "item.json"       # relative to the mix file; or body = "..." inline
    expect_status = [201]

Every problem is one line naming the file, the entry (its number, from 1, and its name) and
the field: ``mix.toml: request 2 ("POST /items"): weight: must be > 0, got 0``.

A mix is part of the catalogue because a user's app's workload is one
(:class:`pywebbench.catalogue.byo.UserWorkload`); loading with it, checking each endpoint
once and choosing the request the fault phase aims at are :mod:`pywebbench.load.mix`'s.
"""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


class MixEntry(BaseModel):
    """One weighted request of a traffic mix (``MixEntry`` in crates/engine/src/spec/mix.rs;
    docs/mix.md). Entries sharing a ``name`` are one endpoint in the figures.

    ``body`` is sent byte for byte (the engine's document carries it as ``body_b64``);
    ``expect_status`` empty means the spec's own ``expect_status``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    weight: float = 1.0
    method: str = "GET"
    #: Path and query, e.g. ``/items/42?full=1`` (the spec's URL gives host and port).
    path: str = "/"
    headers: list[tuple[str, str]] = []
    body: bytes = b""
    expect_status: list[int] = []

    @model_validator(mode="before")
    @classmethod
    def _body_from_engine(cls, data: Any) -> Any:
        if isinstance(data, dict) and "body_b64" in data:
            data = dict(data)
            data["body"] = base64.b64decode(str(data.pop("body_b64")).strip())
        return data

    @model_serializer(mode="wrap")
    def _engine_layout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        del doc["body"]
        if self.body:
            doc["body_b64"] = base64.b64encode(self.body).decode("ascii")
        doc["headers"] = [list(h) for h in self.headers]
        return doc


#: The methods a mix entry may use.
KNOWN_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: The keys of one ``[[request]]`` entry.
ENTRY_KEYS = (
    "name",
    "weight",
    "method",
    "path",
    "headers",
    "body",
    "body_file",
    "expect_status",
)
#: An entry's expected statuses when it names none.
DEFAULT_EXPECT = (200,)


class MixFileError(ValueError):
    """A mix file that cannot be used; the message is one line naming the file, the entry
    and the field."""


def _entry_error(where: str, i: int, name: object, field: str, why: str) -> MixFileError:
    label = f" ({json.dumps(name, ensure_ascii=False)})" if isinstance(name, str) and name else ""
    return MixFileError(f"{where}: request {i + 1}{label}: {field}: {why}")


def _entries_of(doc: object, where: str) -> list[Any]:
    """The list of entries of a parsed document: ``{"request": [...]}`` (TOML's
    ``[[request]]``), or a bare JSON list."""
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        unknown = sorted(set(doc) - {"request"})
        if unknown:
            raise MixFileError(f"{where}: unknown key {unknown[0]!r} (entries are [[request]])")
        entries = doc.get("request")
        if isinstance(entries, list):
            return entries
    raise MixFileError(f"{where}: no [[request]] entries")


def _headers(value: object) -> list[tuple[str, str]] | None:
    """A table ``{name = value}`` or a list of ``[name, value]`` pairs; None when neither."""
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, list) and all(
        isinstance(p, list | tuple) and len(p) == 2 for p in value
    ):
        pairs = [(p[0], p[1]) for p in value]
    else:
        return None
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
        return None
    return [(str(k), str(v)) for k, v in pairs]


def parse_entry(raw: object, i: int, where: str, base: Path) -> MixEntry:
    """One ``[[request]]`` entry (number ``i`` from 0) of the file ``where``, with
    ``body_file`` read relative to ``base``.

    Raises:
        MixFileError: one line naming the entry and the field.
    """
    if not isinstance(raw, dict):
        raise MixFileError(f"{where}: request {i + 1}: expected a table of fields")
    name = raw.get("name")

    def fail(field: str, why: str) -> MixFileError:
        return _entry_error(where, i, name, field, why)

    unknown = sorted(set(raw) - set(ENTRY_KEYS))
    if unknown:
        raise fail(unknown[0], f"unknown field (fields: {', '.join(ENTRY_KEYS)})")
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "required: the endpoint this request belongs to")
    weight = raw.get("weight")
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise fail("weight", f"required: a number > 0, got {weight!r}")
    if not (math.isfinite(weight) and weight > 0):
        raise fail("weight", f"must be > 0, got {weight!r}")
    method = raw.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in KNOWN_METHODS:
        raise fail("method", f"{method!r} is not one of {', '.join(KNOWN_METHODS)}")
    path = raw.get("path", "/")
    if not isinstance(path, str) or not path.startswith("/"):
        raise fail("path", f"must start with '/', got {path!r}")
    if any(c in path for c in " \r\n"):
        raise fail("path", f"must not contain spaces or line breaks: {path!r}")
    headers = _headers(raw.get("headers", {}))
    if headers is None:
        raise fail("headers", 'expected a table of name = "value" (strings)')
    if "body" in raw and "body_file" in raw:
        raise fail("body_file", "give body or body_file, not both")
    body = b""
    if "body" in raw:
        if not isinstance(raw["body"], str):
            raise fail("body", f"expected a string, got {raw['body']!r}")
        body = raw["body"].encode()
    elif "body_file" in raw:
        if not isinstance(raw["body_file"], str):
            raise fail("body_file", f"expected a path, got {raw['body_file']!r}")
        body_path = base / raw["body_file"]
        try:
            body = body_path.read_bytes()
        except OSError as e:
            raise fail("body_file", f"cannot read {body_path}: {e.strerror or e}") from None
    expect = raw.get("expect_status", list(DEFAULT_EXPECT))
    if isinstance(expect, int) and not isinstance(expect, bool):
        expect = [expect]
    if (
        not isinstance(expect, list)
        or not expect
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in expect)
        or not all(100 <= s <= 599 for s in expect)
    ):
        raise fail("expect_status", f"expected status codes (100-599), got {expect!r}")
    try:
        return MixEntry(
            name=name.strip(),
            weight=float(weight),
            method=method.upper(),
            path=path,
            headers=headers,
            body=body,
            expect_status=list(expect),
        )
    except ValueError as e:  # the model's own checks (types)
        raise fail("entry", str(e).splitlines()[0]) from None


def parse_mix(text: str, where: str, base: Path, *, json_format: bool = False) -> list[MixEntry]:
    """The entries of a mix document (TOML, or JSON with ``json_format``); ``where`` names
    it in errors and ``base`` is the folder ``body_file`` paths are relative to.

    Raises:
        MixFileError: one line naming the file (and the entry and field).
    """
    try:
        doc: object = json.loads(text) if json_format else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
        kind = "JSON" if json_format else "TOML"
        raise MixFileError(f"{where}: not valid {kind}: {e}") from None
    raw = _entries_of(doc, where)
    if not raw:
        raise MixFileError(f"{where}: no [[request]] entries")
    return [parse_entry(r, i, where, base) for i, r in enumerate(raw)]


def load_mix(path: Path) -> list[MixEntry]:
    """Read a mix file: JSON when its name ends in ``.json``, else TOML.

    Raises:
        MixFileError: one line naming the file, the entry and the field.
    """
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise MixFileError(f"{path}: cannot read: {e}") from None
    return parse_mix(text, str(path), path.parent, json_format=path.suffix.lower() == ".json")


def _toml_str(s: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these)."""
    return json.dumps(s, ensure_ascii=False)


def entry_fields(e: MixEntry) -> dict[str, Any]:
    """An entry as a mix file's ``[[request]]`` table: the fields that differ from the
    defaults (``name``, ``weight`` and ``path`` always)."""
    weight: float = int(e.weight) if e.weight == int(e.weight) else e.weight
    out: dict[str, Any] = {"name": e.name, "weight": weight}
    if e.method != "GET":
        out["method"] = e.method
    out["path"] = e.path
    if e.headers:
        out["headers"] = dict(e.headers)
    if e.body:
        out["body"] = e.body.decode("utf-8", "replace")
    if list(e.expect_status) != list(DEFAULT_EXPECT):
        out["expect_status"] = list(e.expect_status)
    return out


def mix_to_json(entries: Sequence[MixEntry]) -> str:
    """The entries as a mix file (JSON: ``{"request": [...]}``)."""
    return json.dumps({"request": [entry_fields(e) for e in entries]}, indent=1) + "\n"


def mix_to_toml(entries: Sequence[MixEntry], header: str = "") -> str:
    """The entries as a mix file (TOML), each ``[[request]]`` with the fields that differ
    from the defaults; ``header`` lines become comments at the top."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for e in entries:
        if lines:
            lines.append("")
        lines.append("[[request]]")
        for key, value in entry_fields(e).items():
            if isinstance(value, dict):
                table = ", ".join(f"{_toml_str(k)} = {_toml_str(v)}" for k, v in value.items())
                lines.append(f"{key} = {{ {table} }}")
            elif isinstance(value, str):
                lines.append(f"{key} = {_toml_str(value)}")
            else:
                lines.append(f"{key} = {value!r}")
    return "\n".join(lines) + "\n"
