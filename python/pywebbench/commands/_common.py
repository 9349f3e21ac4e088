"""Helpers shared by the commands that read the results store (not a command itself)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import click

from pywebbench.study.config import DEFAULT_RESULTS_DIR

F = TypeVar("F", bound=Callable[..., object])


def fail(message: str) -> NoReturn:
    """Bad input: one line on standard error, exit status 2."""
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def store_options(func: F) -> F:
    """``--results-dir`` and ``--store`` (passed as ``results_dir`` and ``store_path``)."""
    func = click.option("--store", "store_path", help="Path of the store file itself (overrides).")(
        func
    )
    return click.option(
        "--results-dir",
        default=DEFAULT_RESULTS_DIR,
        show_default=True,
        help="Directory holding pywebbench.sqlite.",
    )(func)


def store_path_of(results_dir: str, store_path: str | None) -> Path:
    """The store file named by ``--store``, else the one in ``--results-dir``."""
    from pywebbench.store import DEFAULT_FILENAME

    return Path(store_path) if store_path else Path(results_dir) / DEFAULT_FILENAME
