"""Bring your own app: a user's WSGI/ASGI application as a framework of the catalogue.

``pywebbench verify --app mypkg.wsgi:application --requirements req.txt --path / --path /api``
turns the app into a :class:`UserFramework` whose "workloads" are the paths to request. It then
runs on every server of its interface like a built-in framework. The interface (WSGI or ASGI)
is declared with ``--interface`` or detected by importing the app inside a virtualenv that has
the user's requirements (provisioned and cached like any stack).
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pywebbench.catalogue.base import (
    ASGI,
    WSGI,
    Framework,
    InstallStep,
    Interpreter,
    ServerAdapter,
    Stack,
)
from pywebbench.catalogue.workloads import HttpRequest, Workload

_APP = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
PATH_PREFIX = "path:"


@dataclass(frozen=True)
class UserWorkload(Workload):
    """``GET <path>`` of a user's app, with the user's expectations (status, body substring)."""

    path: str = "/"
    expect_status: int | None = None  # None: any 2xx
    expect_body: str | None = None  # substring the body must contain


def user_workload(path: str, expect_status: int | None, expect_body: str | None) -> UserWorkload:
    """The workload that requests ``path`` of a user's app."""
    return UserWorkload(
        name=f"{PATH_PREFIX}{path}",
        description=f"GET {path} of the user's app",
        _build=lambda _params: HttpRequest("GET", path),
        path=path,
        expect_status=expect_status,
        expect_body=expect_body,
    )


class UserFramework(Framework):
    """A user's app (``module:callable``) with what it needs installed."""

    def __init__(
        self,
        app: str,
        interface: str,
        requirements: tuple[str, ...] = (),
        steps: tuple[InstallStep, ...] = (),
        project: Path | None = None,
        workloads: tuple[UserWorkload, ...] = (),
    ) -> None:
        self.app = app
        self.interface = interface
        self.name = "app-" + app.replace(":", ".")
        self._requirements = requirements
        self._steps = steps
        self.project = project
        self.user_workloads = {w.name: w for w in workloads}
        self.workloads = frozenset(self.user_workloads)

    @property
    def app_dir(self) -> Path | None:
        """The directory to put first on PYTHONPATH (the project), if any."""
        return self.project

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return list(self._requirements)

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        return list(self._steps)


def parse_requirements(
    path: Path, flag: str = "--requirements"
) -> tuple[list[str], list[InstallStep]]:
    """Requirement lines of a pip requirements file (``-r`` followed, ``-e`` as install steps).

    Plain lines go into the stack's requirements (so their content is part of the cache key).
    Other pip options are refused with a ValueError naming ``flag``.
    """
    reqs: list[str] = []
    steps: list[InstallStep] = []
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{flag} {path}: cannot read it ({exc.strerror})") from None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ", "-r", "--requirement=")):
            target = re.sub(r"^(-r|--requirement)[= ]?", "", line).strip()
            sub = (path.parent / target).resolve()
            more, more_steps = parse_requirements(sub, flag)
            reqs += more
            steps += more_steps
        elif line.startswith(("-e ", "--editable ", "--editable=")):
            target = re.sub(r"^(-e|--editable)[= ]?", "", line).strip()
            if "://" not in target and not target.startswith("git+"):
                target = str((path.parent / target).resolve())
            steps.append(InstallStep((), ("-e", target)))
        elif line.startswith("-"):
            raise ValueError(
                f"{flag} {path}:{lineno}: option {line.split()[0]!r} is not supported here; "
                "keep only requirement lines, -r and -e"
            )
        else:
            reqs.append(line)
    return reqs, steps


def _is_installable(project: Path) -> bool:
    return any((project / f).exists() for f in ("pyproject.toml", "setup.py", "setup.cfg"))


def user_framework(
    app: str,
    interface: str | None,
    requirements: Path | None,
    project: Path | None,
    paths: list[str],
    expect_status: int | None,
    expect_body: str | None,
    *,
    interpreter: Interpreter | None = None,
    progress=None,
) -> Framework:
    """A framework entry for the user's app; detects WSGI vs ASGI if ``interface`` is None.

    Detection imports the app in a virtualenv (of ``interpreter``, default the running CPython)
    holding the user's requirements/project. Raises ValueError naming the bad flag.
    """
    if not _APP.match(app or ""):
        raise ValueError(
            f"--app {app!r}: expected module:callable, e.g. myproject.wsgi:application"
        )
    if interface is not None:
        interface = interface.lower()
        if interface not in (WSGI, ASGI):
            raise ValueError(f"--interface {interface!r}: choose wsgi or asgi")
    reqs: list[str] = []
    steps: list[InstallStep] = []
    if requirements is not None:
        requirements = Path(requirements).expanduser().resolve()
        if not requirements.is_file():
            raise ValueError(f"--requirements {requirements}: no such file")
        reqs, steps = parse_requirements(requirements)
    if project is not None:
        project = Path(project).expanduser().resolve()
        if not project.is_dir():
            raise ValueError(f"--project {project}: no such directory")
        if _is_installable(project):
            steps.append(InstallStep((), ("-e", str(project))))
    paths = list(paths) or ["/"]
    for p in paths:
        if not p.startswith("/"):
            raise ValueError(f"--path {p!r}: must start with '/' (e.g. /api/items?limit=5)")
    if expect_status is not None and not 100 <= expect_status <= 599:
        raise ValueError(f"--expect-status {expect_status}: not an HTTP status (100-599)")
    workloads = tuple(user_workload(p, expect_status, expect_body) for p in dict.fromkeys(paths))
    fw = UserFramework(app, interface or "", tuple(reqs), tuple(steps), project, workloads)
    if interface is None:
        fw.interface = detect_interface(fw, interpreter=interpreter, progress=progress)
    return fw


# Runs inside the stack venv (Python 3.9+, no pywebbench): prints {"interface": ..} or {"error": ..}
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
    print(json.dumps({"import_error": "cannot import %s: %s" % (spec, tb)}))
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
print(json.dumps({"interface": kind, "error": why}))
"""


class _NoServer(ServerAdapter):
    """Stands in for a server when only the app's own requirements are needed (detection)."""

    name = "none"
    interface = ""

    def requirements(self, interpreter: Interpreter) -> list[str]:
        return []


def detect_interface(
    fw: UserFramework, *, interpreter: Interpreter | None = None, progress=None
) -> str:
    """Import the app in a venv with its requirements and tell WSGI from ASGI.

    Raises ValueError (naming ``--app``/``--interface``) when it cannot be imported or told.
    """
    from pywebbench.catalogue.interpreters import default_interpreters
    from pywebbench.provision.venv import ProvisionError, provision

    interp = interpreter or default_interpreters()[0]
    stack = Stack(interp, _NoServer(), fw, tuple(fw.requirements(interp)))
    try:
        env = provision(stack, progress=progress)
    except ProvisionError as exc:
        raise ValueError(f"--app {fw.app}: installing its requirements failed: {exc}") from None
    pythonpath = str(fw.project) if fw.project else ""
    proc = subprocess.run(
        [str(env.python), "-c", _DETECT, fw.app],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(fw.project or Path.cwd()),
        env={"PATH": f"{env.bin}:/usr/bin:/bin", "PYTHONPATH": pythonpath, "LC_ALL": "C.UTF-8"},
    )
    try:
        answer = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ValueError(
            f"--app {fw.app}: importing it failed: {' | '.join(tail) or 'no output'}"
        ) from None
    if answer.get("interface") in (WSGI, ASGI):
        return answer["interface"]
    if answer.get("import_error"):
        where = f" (PYTHONPATH={pythonpath})" if pythonpath else " (use --project for local code)"
        raise ValueError(f"--app {fw.app}: {answer['import_error']}{where}")
    raise ValueError(f"--app {fw.app}: {answer.get('error')}; declare it with --interface")


# ---------------------------------------------------------------- verification of user paths


@dataclass
class PathReport:
    """The outcome of requesting one path of a user's app (shaped like a VerifyReport)."""

    workload: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    status: int | None = None
    seconds: float = 0.0


def check_path(base_url: str, workload: UserWorkload, timeout_s: float = 10.0) -> PathReport:
    """GET the workload's path; check status (expected, or any 2xx), body substring, framing."""
    url = urlsplit(base_url)
    report = PathReport(workload.name, ok=False)
    started = time.monotonic()
    conn = http.client.HTTPConnection(
        url.hostname or "127.0.0.1", url.port or 80, timeout=timeout_s
    )
    try:
        conn.request("GET", workload.path, headers={"Host": url.netloc})
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        report.problems.append(f"GET {workload.path}: {type(exc).__name__}: {exc}")
        return report
    finally:
        conn.close()
    report.seconds = time.monotonic() - started
    report.status = resp.status
    if workload.expect_status is not None:
        if resp.status != workload.expect_status:
            report.problems.append(
                f"GET {workload.path}: status {resp.status}, expected {workload.expect_status}"
            )
    elif not 200 <= resp.status < 300:
        report.problems.append(f"GET {workload.path}: status {resp.status}, expected 2xx")
    length = resp.getheader("Content-Length")
    chunked = "chunked" in (resp.getheader("Transfer-Encoding") or "").lower()
    if length is None and not chunked:
        report.problems.append(f"GET {workload.path}: neither Content-Length nor chunked framing")
    elif length is not None and length.isdigit() and int(length) != len(body):
        report.problems.append(
            f"GET {workload.path}: Content-Length {length} but {len(body)} body bytes"
        )
    if resp.getheader("Date") is None:
        report.warnings.append(f"GET {workload.path}: no Date header")
    if workload.expect_body is not None:
        text = body.decode("utf-8", "replace")
        if workload.expect_body not in text:
            flat = " ".join(text.split())
            shown = flat[:80] + ("..." if len(flat) > 80 else "")
            report.problems.append(
                f"GET {workload.path}: body does not contain {workload.expect_body!r} "
                f"(got {shown!r})"
            )
    report.ok = not report.problems
    return report
