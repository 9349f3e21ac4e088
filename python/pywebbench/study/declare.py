"""How a key of ``pywebbench.toml`` is set: the marks a config field carries.

Every field of the study model (:mod:`pywebbench.study.config`) is declared once, with one of
two marks in its annotation (``Annotated[int, Flag("--replicates")]``):

- :class:`Flag`: the key also has a ``pywebbench run`` flag. The flag's type, choices,
  repeatability and default follow from the field itself; the mark adds only what the field
  cannot say (the flag's name, its short alias, a help text written for the command line).
- :class:`FileOnly`: the key is set in the file only, and the mark says why; its kind
  :class:`Stored` is a key nobody sets: ``run`` writes it into the run's stored configuration.

:mod:`pywebbench.study.options` reads the marks to build the click options, to turn the parsed
flags back into overrides, to name a flag in errors, and to write docs/config.md's table of
keys; ``tests/study/test_options.py`` fails when a field carries neither mark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Flag:
    """The ``pywebbench run`` flag of a config key.

    Attributes:
        name: the long flag, ``--duration``.
        short: a short alias, ``-d``.
        help: the ``--help`` text; default: the field's description.
        split: for a list key, whether one value may hold a comma list (``-c 1,16``).
        parse: turns the flag's raw values (a tuple of strings for a repeatable flag) into
            the key's value; raises ``ValueError`` with a message that follows the flag.
        also: other keys of the same table set alongside when the flag is given
            (``--rate`` also sets ``model = "open"``).
        metavar: the value's name in ``--help``.
    """

    name: str
    short: str | None = None
    help: str | None = None
    split: bool = True
    parse: Callable[[tuple[str, ...]], Any] | None = None
    also: Mapping[str, Any] = field(default_factory=dict)
    metavar: str | None = None


@dataclass(frozen=True)
class FileOnly:
    """A config key with no flag: set in ``pywebbench.toml`` only, for the reason given."""

    why: str


@dataclass(frozen=True)
class Stored(FileOnly):
    """A config key with no flag that no study file sets either: ``run`` writes it into the
    configuration it stores with the run (``--resume`` reads it back), for the reason given."""


def comma_list(values: tuple[str, ...]) -> list[str]:
    """A repeatable flag's values with comma lists spread: ``("1,16", "64")`` -> 1, 16, 64."""
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def one_or_list(values: tuple[str, ...]) -> str | list[str]:
    """A repeatable flag of a key that takes one value or a list: the value itself when given
    once (stored as before the key took lists), else the list, in order."""
    return values[0] if len(values) == 1 else list(values)
