"""The click options of ``pywebbench run``, built from the study model's declarations.

Each flagged key of :class:`~pywebbench.study.config.StudyConfig` becomes one option
(:mod:`pywebbench.study.options`): a switch for a boolean key, a choice for a ``Literal``, a
repeatable option taking comma lists for a list or a table, else one typed value. Nothing here
names a key: add the key with its :class:`~pywebbench.study.declare.Flag` to the model and the
flag appears.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import click

from pywebbench.study.options import Option, flagged

F = TypeVar("F", bound=Callable[..., Any])


def click_option(option: Option) -> Callable[[F], F]:
    """The click option of one flagged key."""
    flag = option.flag
    assert flag is not None
    decls = [flag.name, *([flag.short] if flag.short else []), option.dest]
    kwargs: dict[str, Any] = {"help": flag.help or option.info.description}
    if flag.metavar:
        kwargs["metavar"] = flag.metavar
    kind = option.annotation
    if kind is bool:
        kwargs["is_flag"] = True
    elif option.repeatable:
        kwargs["multiple"] = True
    elif typing.get_origin(kind) is Literal:
        kwargs["type"] = click.Choice([str(a) for a in typing.get_args(kind)])
    else:
        kwargs["type"] = kind
    return click.option(*decls, **kwargs)


def study_options(func: F) -> F:
    """Add one option per flagged key of the study model, in the model's order."""
    for option in reversed(flagged()):
        func = click_option(option)(func)
    return func
