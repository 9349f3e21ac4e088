"""The study's options, read from their one declaration: the fields of the config model.

Each leaf field of :class:`~pywebbench.study.config.StudyConfig` is one option: its TOML key is
its path (``load.duration_s``), its JSON Schema entry is generated from it, and its mark
(:mod:`pywebbench.study.declare`) says whether ``pywebbench run`` has a flag for it. This module
turns the flags a user typed back into overrides shaped like the file (:func:`overrides`),
names the flag of a key in errors (:func:`flag_of`), and writes the table of keys in
docs/config.md (:func:`docs_table`). The click options themselves are built in
:mod:`pywebbench.commands._options`.

``python -m pywebbench.study.options --docs docs/config.md`` rewrites that table in place.
"""

from __future__ import annotations

import copy
import json
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from pywebbench.study.config import ConfigError, StudyConfig
from pywebbench.study.declare import FileOnly, Flag, Stored, comma_list

DOCS_START = "<!-- options table: python -m pywebbench.study.options --docs docs/config.md -->"
DOCS_END = "<!-- end of options table -->"


@dataclass(frozen=True)
class Option:
    """One key of ``pywebbench.toml`` and, when it has one, its ``pywebbench run`` flag."""

    path: str  # "load.duration_s"
    model: type[BaseModel]  # the table the key belongs to (LoadConfig)
    info: FieldInfo
    flag: Flag | None
    file_only: FileOnly | None

    @property
    def name(self) -> str:
        """The key within its table: ``duration_s``."""
        return self.path.rpartition(".")[2]

    @property
    def dest(self) -> str:
        """The click parameter name of the flag: the path with ``__`` for dots."""
        return self.path.replace(".", "__")

    @property
    def annotation(self) -> Any:
        """The field's type without ``| None``."""
        return _without_none(self.info.annotation)

    @property
    def repeatable(self) -> bool:
        """A list or a table, or a key taking one value or a list (``str | list[str]``): the
        flag may be given several times."""
        return (
            typing.get_origin(self.annotation) in (list, dict)
            or _list_in_union(self.annotation) is not None
        )

    @property
    def item_type(self) -> Any:
        """The type of one value: the element type of a list (also of a value-or-list),
        else the type itself."""
        listed = _list_in_union(self.annotation)
        if listed is not None:
            return typing.get_args(listed)[0]
        if typing.get_origin(self.annotation) is list:
            return typing.get_args(self.annotation)[0]
        return self.annotation

    def default(self) -> Any:
        """The model's default (``None`` for a required key)."""
        if self.info.is_required():
            return None
        return self.info.get_default(call_default_factory=True)


def _without_none(annotation: Any) -> Any:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _list_in_union(annotation: Any) -> Any:
    """The ``list[X]`` of a union that also takes a single value (``str | list[str]``)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next((a for a in typing.get_args(annotation) if typing.get_origin(a) is list), None)
    return None


def _table(annotation: Any) -> type[BaseModel] | None:
    inner = _without_none(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _walk(model: type[BaseModel], prefix: str) -> Iterator[Option]:
    for name, info in model.model_fields.items():
        table = _table(info.annotation)
        if table is not None:
            yield from _walk(table, f"{prefix}{name}.")
            continue
        flag = next((m for m in info.metadata if isinstance(m, Flag)), None)
        file_only = next((m for m in info.metadata if isinstance(m, FileOnly)), None)
        yield Option(f"{prefix}{name}", model, info, flag, file_only)


@cache
def study_options() -> tuple[Option, ...]:
    """Every key of the study file, in the model's order."""
    return tuple(_walk(StudyConfig, ""))


def flagged() -> list[Option]:
    """The keys that have a ``pywebbench run`` flag."""
    return [o for o in study_options() if o.flag is not None]


def flag_of(path: str) -> str:
    """The flag of key ``path`` (``load.load_agents`` -> ``--load-agents``), else the path."""
    for option in study_options():
        if option.path == path and option.flag is not None:
            return option.flag.name
    return path


def _number(flag: str, kind: type, text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: not a number") from None


def _value(option: Option, raw: Any) -> Any:
    """The key's value from a given flag's raw value (a tuple for a repeatable flag)."""
    flag = option.flag
    assert flag is not None
    if flag.parse is not None:
        try:
            return flag.parse(raw)
        except ValueError as exc:
            text = str(exc)  # "'value': why" follows the flag with a space, "why" with ": "
            sep = " " if text.startswith("'") else ": "
            raise ConfigError(f"{flag.name}{sep}{text}") from None
    if option.annotation is bool:
        return not option.default()
    if typing.get_origin(option.annotation) is list:
        items = comma_list(raw) if flag.split else list(raw)
        kind = option.item_type
        if kind in (int, float):
            return [_number(flag.name, kind, text) for text in items]
        return items
    return raw


def _check(option: Option, value: Any) -> None:
    """Validate one value against its field, with errors that name the flag."""
    assert option.flag is not None
    try:
        option.model.__pydantic_validator__.validate_assignment(
            option.model.model_construct(), option.name, value
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        index = next((p for p in err["loc"] if isinstance(p, int)), None)
        if index is not None and isinstance(value, list) and index < len(value):
            raise ConfigError(f"{option.flag.name} {value[index]!r}: {msg}") from None
        raise ConfigError(f"{option.flag.name}: {msg}") from None


def given(values: Mapping[str, Any]) -> list[Option]:
    """The flagged options whose flag appears in ``values`` (click's parameters by dest)."""
    return [o for o in flagged() if _is_given(values.get(o.dest))]


def _is_given(value: Any) -> bool:
    """What click passes for an absent flag: None, () for a repeatable one, False for a switch."""
    return not (value is None or value is False or value == ())


def overrides(values: Mapping[str, Any]) -> dict[str, Any]:
    """The flags a user gave -> a nested dict shaped like ``pywebbench.toml``.

    ``values`` maps each flag's :attr:`Option.dest` to what click parsed. Every value is
    validated against its key here, so an error names the flag (``--duration: ...``).
    """
    out: dict[str, Any] = {}
    chosen = given(values)
    for option in chosen:
        value = _value(option, values[option.dest])
        _check(option, value)
        *tables, name = option.path.split(".")
        node = out
        for table in tables:
            node = node.setdefault(table, {})
        node[name] = value
        assert option.flag is not None
        node.update(copy.deepcopy(dict(option.flag.also)))
    _check_required(chosen)
    return out


def _check_required(chosen: list[Option]) -> None:
    """An optional table (``[app]``) set by flags needs the flags of its required keys."""
    names = {o.path for o in chosen}
    for option in flagged():
        table = option.path.rpartition(".")[0]
        if not (table and option.info.is_required() and option.path not in names):
            continue
        others = [o for o in flagged() if o.path.startswith(table + ".") and o is not option]
        if any(o.path in names for o in others):
            assert option.flag is not None
            raise ConfigError(
                "/".join(o.flag.name for o in others if o.flag) + f" need {option.flag.name}"
            )


# --- docs/config.md -------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default_text(option: Option) -> str:
    if option.info.is_required():
        return "required"
    value = option.default()
    return "unset" if value is None else f"`{json.dumps(value)}`"


def _flag_text(option: Option) -> str:
    if option.flag is not None:
        short = f"`{option.flag.short}`, " if option.flag.short else ""
        return f"{short}`{option.flag.name}`"
    assert option.file_only is not None
    if isinstance(option.file_only, Stored):
        return f"none, stored: {option.file_only.why}"
    return f"file only: {option.file_only.why}"


def _values_text(option: Option) -> str:
    kind = option.item_type
    if typing.get_origin(kind) is Literal:
        return " | ".join(str(a) for a in typing.get_args(kind))
    return ""


def docs_table() -> str:
    """The Markdown table of every key: key, flag, default, description."""
    rows = [
        "| key | flag | default | description |",
        "|---|---|---|---|",
    ]
    for option in study_options():
        description = option.info.description or ""
        values = _values_text(option)
        if values:
            description += f" ({values})"
        rows.append(
            f"| `{option.path}` | {_cell(_flag_text(option))} | {_cell(_default_text(option))} "
            f"| {_cell(description)} |"
        )
    return "\n".join(rows)


def with_docs_table(text: str) -> str:
    """``text`` (docs/config.md) with its table of keys replaced by :func:`docs_table`."""
    head, start, rest = text.partition(DOCS_START)
    _, end, tail = rest.partition(DOCS_END)
    if not (start and end):
        raise ValueError(f"docs/config.md lacks the markers {DOCS_START!r} ... {DOCS_END!r}")
    return f"{head}{DOCS_START}\n{docs_table()}\n{DOCS_END}{tail}"


if __name__ == "__main__":  # pragma: no cover - docs generator
    if len(sys.argv) == 3 and sys.argv[1] == "--docs":
        path = Path(sys.argv[2])
        path.write_text(with_docs_table(path.read_text()))
    else:
        print("usage: python -m pywebbench.study.options --docs docs/config.md", file=sys.stderr)
        sys.exit(2)
