"""A user's app (bring your own app) made ready to run: its interface detected in a venv.

:func:`user_framework` is what ``verify`` calls: the flags parsed by
:func:`pywebbench.catalogue.byo.parse_user_app`, then, without ``--interface``,
:func:`detect_interface` imports the app inside a virtualenv holding the user's requirements
(provisioned and cached like any stack) and tells WSGI from ASGI by its signature.
:func:`user_frameworks` does the same for several project directories of one app (one
framework each, detected each). A study plans without importing anything, and
:func:`pywebbench.bringup.with_interfaces_detected` detects at bring-up, before any
server starts (``run``, ``ab``), with :func:`detect_interfaces`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pywebbench.catalogue.base import ASGI, WSGI, Interpreter, ServerAdapter, Stack
from pywebbench.catalogue.byo import UserFramework, parse_user_app, parse_user_apps
from pywebbench.catalogue.mix import MixEntry
from pywebbench.launch.process import ProcessGroup
from pywebbench.provision.venv import Progress, ProvisionError, provision

__all__ = [
    "DETECT_TIMEOUT_S",
    "detect_interface",
    "detect_interfaces",
    "user_framework",
    "user_frameworks",
]

#: Upper bound of importing the user's app to detect its interface.
DETECT_TIMEOUT_S = 120.0


def user_framework(
    app: str,
    interface: str | None,
    requirements: Path | None,
    project: Path | None,
    paths: list[str],
    expect_status: int | None,
    expect_body: str | None,
    *,
    mix: Path | None = None,
    interpreter: Interpreter | None = None,
    progress: Progress | None = None,
) -> UserFramework:
    """A framework entry for the user's app; detects WSGI vs ASGI if ``interface`` is None.

    Detection imports the app in a virtualenv (of ``interpreter``, default the running CPython)
    holding the user's requirements/project. Raises ValueError naming the bad flag.
    """
    fw = parse_user_app(
        app, interface, requirements, project, paths, expect_status, expect_body, mix
    )
    if interface is None:
        fw.interface = detect_interface(fw, interpreter=interpreter, progress=progress)
    return fw


def user_frameworks(
    app: str,
    interface: str | None,
    requirements: Path | None,
    projects: Sequence[Path],
    paths: list[str],
    expect_status: int | None,
    expect_body: str | None,
    *,
    mix: Path | None = None,
    mix_entries: Sequence[MixEntry] | None = None,
    interpreter: Interpreter | None = None,
    progress: Progress | None = None,
) -> list[UserFramework]:
    """One framework per project directory of the app (one with none), in order
    (:func:`~pywebbench.catalogue.byo.parse_user_apps`), each one's interface detected unless
    ``interface`` is given (:func:`detect_interfaces`). Every project is checked before any
    is imported. Raises ValueError naming the bad flag."""
    fws = parse_user_apps(
        app, interface, requirements, projects, paths, expect_status, expect_body,
        mix=mix, mix_entries=mix_entries,
    )  # fmt: skip
    detect_interfaces(fws, interpreter=interpreter, progress=progress)
    return fws


def detect_interfaces(
    frameworks: Iterable[UserFramework],
    *,
    interpreter: Interpreter | None = None,
    progress: Progress | None = None,
) -> None:
    """Set the interface of each of ``frameworks`` whose interface is not known yet
    (:func:`detect_interface`: each one imported on its own, as each project may import
    differently). Raises ValueError naming ``--app``."""
    for fw in frameworks:
        if not fw.interface:
            fw.interface = detect_interface(fw, interpreter=interpreter, progress=progress)


#: Prefix of the verdict line among whatever else the app prints while it is imported.
_VERDICT = "pwb-detect: "
# Runs inside the stack venv (Python 3.9+, no pywebbench): prints the verdict line,
# {"interface": .., "error": ..} or {"import_error": ..}, on stdout.
_DETECT = r"""
import importlib, inspect, json, sys, traceback
spec = sys.argv[1]
mod, _, attr = spec.partition(":")
try:
    obj = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
except BaseException as exc:
    tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
    print("pwb-detect: " + json.dumps({"import_error": "cannot import %s: %s" % (spec, tb)}))
    sys.exit(0)

def verdict(o):
    if not callable(o):
        return None, "%s is not callable" % spec
    fn = o if (inspect.isfunction(o) or inspect.ismethod(o)) else type(o).__call__
    bound = not (inspect.isfunction(o) or inspect.ismethod(o))
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inspect.unwrap(fn)):
        return "asgi", ""
    try:
        sig = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return None, "cannot inspect the signature of %s" % spec
    params = list(sig.parameters.values())
    if bound and params:
        params = params[1:]  # self
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
           and p.default is p.empty]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return "wsgi", ""  # a synchronous decorator wrapper: WSGI (ASGI apps are async)
    if len(pos) == 3:
        return "asgi", ""
    if len(pos) == 2:
        return "wsgi", ""
    return None, "%s takes %d positional arguments: not WSGI (2) nor ASGI (3)" % (spec, len(pos))

kind, why = verdict(obj)
print("pwb-detect: " + json.dumps({"interface": kind, "error": why}), flush=True)
"""


class _NoServer(ServerAdapter):
    """Stands in for a server when only the app's own requirements are needed (detection)."""

    name = "none"
    interface = ""

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []


def detect_interface(
    fw: UserFramework, *, interpreter: Interpreter | None = None, progress: Progress | None = None
) -> str:
    """Import the app in a venv with its requirements and tell WSGI from ASGI.

    Raises ValueError (naming ``--app``/``--interface``) when it cannot be imported or told.
    """
    from pywebbench.catalogue.interpreters import default_interpreters

    # which of several projects of the app (their errors would read alike otherwise)
    what = f"--app {fw.app}" + (f" in --project {fw.project}" if fw.tag else "")
    interp = interpreter or default_interpreters()[0]
    stack = Stack(interp, _NoServer(), fw, tuple(fw.requirements(interp)))
    try:
        env = provision(stack, progress=progress)
    except ProvisionError as exc:
        raise ValueError(f"{what}: installing its requirements failed: {exc}") from None
    pythonpath = str(fw.project) if fw.project else ""
    output = _run_detection(
        [str(env.python), "-c", _DETECT, fw.app],
        cwd=fw.project or Path.cwd(),
        env={"PATH": f"{env.bin}:/usr/bin:/bin", "PYTHONPATH": pythonpath, "LC_ALL": "C.UTF-8"},
        what=what,
    )
    verdicts = [ln for ln in output.splitlines() if ln.startswith(_VERDICT)]
    try:
        answer: dict[str, Any] = json.loads(verdicts[-1][len(_VERDICT) :])
    except (ValueError, IndexError):
        tail = output.strip().splitlines()[-3:]
        raise ValueError(
            f"{what}: importing it failed: {' | '.join(tail) or 'no output'}"
        ) from None
    kind = answer.get("interface")
    if kind in (WSGI, ASGI):
        return str(kind)
    if answer.get("import_error"):
        where = f" (PYTHONPATH={pythonpath})" if pythonpath else " (use --project for local code)"
        raise ValueError(f"{what}: {answer['import_error']}{where}")
    raise ValueError(f"{what}: {answer.get('error')}; declare it with --interface")


def _run_detection(argv: list[str], *, cwd: Path, env: dict[str, str], what: str) -> str:
    """Run the detection script as a process group (the user's code may start processes);
    return its output (stdout and stderr)."""
    fd, log = tempfile.mkstemp(prefix="pwb-detect-", suffix=".log")
    os.close(fd)
    try:
        group = ProcessGroup.start(argv, log_path=Path(log), env=env, cwd=cwd)
        try:
            group.wait(DETECT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise ValueError(
                f"{what}: importing it took over {DETECT_TIMEOUT_S:.0f} s; "
                "declare its interface with --interface"
            ) from None
        finally:
            group.stop()
        return group.output()
    finally:
        os.unlink(log)
