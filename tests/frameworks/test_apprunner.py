"""The test app runner's retry: an app that could not bind its port is started again on
another one, whether it kept running or exited (socketify's app exits), and only on the
last try does that fail the test."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from apprunner import _wait_ready
from pywebbench.launch.process import ProcessGroup
from pywebbench.provision.services import free_port

FAILS_TO_LISTEN = (
    "import sys; sys.stderr.write('socketify: failed to listen on 127.0.0.1:1\\n'); sys.exit(3)"
)
CRASHES = "import sys; sys.stderr.write('Traceback: boom\\n'); sys.exit(1)"


def _exited(code: str, tmp_path: Path) -> tuple[ProcessGroup, Path]:
    log = tmp_path / "app.log"
    group = ProcessGroup.start([sys.executable, "-c", code], log_path=log)
    group.wait(10)
    group.stop()
    return group, log


def test_an_app_that_exited_on_a_port_clash_is_tried_again(tmp_path: Path) -> None:
    group, log = _exited(FAILS_TO_LISTEN, tmp_path)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert _wait_ready(group, url, log, "socketify", last_try=False) is False
    with pytest.raises(AssertionError, match="socketify exited: .*failed to listen"):
        _wait_ready(group, url, log, "socketify", last_try=True)


def test_an_app_that_exited_for_another_reason_fails_at_once(tmp_path: Path) -> None:
    group, log = _exited(CRASHES, tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(AssertionError, match="app exited: Traceback: boom"):
        _wait_ready(group, url, log, "app", last_try=False)
