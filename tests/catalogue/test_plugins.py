"""Adding a server or a framework is one file: a throwaway server adapter and a throwaway
framework, each one module of a temporary directory named by PYWEBBENCH_PLUGINS, show up in
``pywebbench stacks`` and pass ``pywebbench verify`` (real server on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from pwbtest import command
from pywebbench.catalogue.interpreters import default_interpreters

# The whole server: waitress's launcher under another name and settings.
SERVER = '''
"""A throwaway server: the built-in waitress launcher, another connection limit."""

from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.servers._base import BaseAdapter, backlog


class Throwaway(BaseAdapter):
    name = "pwbtest-server"
    interface = WSGI
    description = "throwaway test server (waitress launcher)"
    notes = "Lives in a plugin module."
    pins = {"modern": ("waitress==3.0.2",), "py39": ("waitress==3.0.2",)}
    launcher = "launch_waitress"

    def launcher_options(self, ctx):
        return {"--connection-limit": 64}

    def settings(self, ctx):
        return self.manifest(ctx, worker_class="waitress", threads_used=True,
                             event_loop="wasyncore", http_parser="waitress", keep_alive="on",
                             backlog=backlog(), connection_limit=64)


ADAPTER = Throwaway()
'''

# The whole framework: its catalogue entry and, in the same file, the app the server imports
# inside the stack's venv (where pywebbench is not installed, so FRAMEWORK is skipped there).
FRAMEWORK = '''
"""A throwaway framework: a raw WSGI app serving the hello workload."""

from pathlib import Path


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/hello":
        body = b"Hello, World!"
        status = "200 OK"
    else:
        body, status = b"not here", "404 Not Found"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


try:
    from pywebbench.catalogue.base import WSGI, Framework
except ImportError:  # imported as the app, inside the stack's venv
    pass
else:

    class Tiny(Framework):
        name = "pwbtest-framework"
        interface = WSGI
        app = "pwbtest_framework:app"
        app_dir = Path(__file__).resolve().parent
        workloads = frozenset({"hello"})

        def requirements(self, interpreter):
            return []

    FRAMEWORK = Tiny()
'''


def run_cli(plugin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin_dir), env.get("PYTHONPATH")]))
    env["PYWEBBENCH_PLUGINS"] = "pwbtest_server,pwbtest_framework"
    return command([*args], env=env, timeout=400)


def test_one_file_server_and_framework(tmp_path: Path) -> None:
    (tmp_path / "pwbtest_server.py").write_text(SERVER)
    (tmp_path / "pwbtest_framework.py").write_text(FRAMEWORK)
    python = default_interpreters()[0].name
    filters = ["--python", python, "--server", "pwbtest-server,waitress"]
    filters += ["--framework", "pwbtest-framework,raw-wsgi"]

    table = run_cli(tmp_path, "stacks", *filters)
    assert table.returncode == 0, table.stderr
    assert "pwbtest-server" in table.stdout and "pwbtest-framework" in table.stdout

    listed = run_cli(tmp_path, "stacks", *filters, "--json")
    names = {s["name"]: s for s in json.loads(listed.stdout)["stacks"]}
    ours = names[f"{python}/pwbtest-server/pwbtest-framework"]
    assert ours["available"] and ours["workloads"] == ["hello"]
    assert ours["requirements"] == ["waitress==3.0.2"]
    assert f"{python}/waitress/pwbtest-framework" in names  # mixes with built-ins
    assert f"{python}/pwbtest-server/raw-wsgi" in names

    done = run_cli(tmp_path, "verify", "--python", python, "--server", "pwbtest-server",
                   "--framework", "pwbtest-framework", "--log-dir", str(tmp_path / "logs"),
                   "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = json.loads(done.stdout)
    assert [(o["stack"], o["workload"], o["status"]) for o in outcomes] == [
        (f"{python}/pwbtest-server/pwbtest-framework", "hello", "pass")
    ], outcomes


def test_plugin_clash_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "pwbtest_server.py").write_text(SERVER.replace('"pwbtest-server"', '"waitress"'))
    (tmp_path / "pwbtest_framework.py").write_text(FRAMEWORK)
    done = run_cli(tmp_path, "stacks")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "Error: PYWEBBENCH_PLUGINS module 'pwbtest_server': server name 'waitress' is "
        "already taken by pywebbench.catalogue.servers.waitress"
    ]
    assert "Traceback" not in done.stderr and not done.stdout
