"""`pywebbench load`: flags, output, JSON, exit status, Ctrl-C, bounded memory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner
from pywebbench.commands.load import NOT_FLAGS, Seconds, SpecOption, command, flag_of, parse_cpus
from pywebbench.load import LoadResult, LoadSpec

# Fields the options set that are not LoadSpec fields: the load agents', and the body's
# name in the engine's JSON (its errors say body_b64).
NOT_SPEC = {"agents", "ray_address", "body_b64"}


def _cli(*args: str) -> subprocess.Popen:
    code = "from pywebbench.cli import main; main()"
    return subprocess.Popen(
        [sys.executable, "-c", code, "load", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_load_thread(pid: int, timeout: float = 30.0) -> None:
    """Wait until the process runs a generator thread (the interpreter start can be slow)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            names = [
                open(f"/proc/{pid}/task/{t}/comm").read().strip()
                for t in os.listdir(f"/proc/{pid}/task")
            ]
        except OSError:
            names = []
        if any(n.startswith("pwb-load") for n in names):
            return
        time.sleep(0.05)
    raise AssertionError("the load never started")


def test_durations_and_cpus_parse() -> None:
    s = Seconds()
    assert s.convert("10", None, None) == 10.0
    assert s.convert("10s", None, None) == 10.0
    assert s.convert("500ms", None, None) == 0.5
    assert s.convert("1.5m", None, None) == 90.0
    assert parse_cpus("0-2,5") == [0, 1, 2, 5]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["-c", "0"], "--connections"),
        (["-d", "ten"], "--duration"),
        (["--pipeline", "4", "--no-keepalive"], "--pipeline"),
        (["-H", "NoColon"], "--header"),
        (["--cpus", "a-b"], "--cpus"),
        (["--rate", "-1"], "--rate"),
        (["--expect-status", "abc"], "--expect-status"),
        (["--arrival", "bursty"], "--arrival"),
        (["--io", "kqueue"], "--io"),
    ],
)
def test_bad_input_names_the_flag(args: list[str], flag: str) -> None:
    res = CliRunner().invoke(command, ["http://127.0.0.1:9/", *args])
    assert res.exit_code == 2, res.output
    assert flag in res.output


def test_every_spec_field_has_one_flag_with_the_specs_default() -> None:
    options = [p for p in command.params if isinstance(p, SpecOption)]
    fields = [f for p in options for f in p.fields]
    assert len(fields) == len(set(fields)), "a field set by two flags"
    spec_fields = set(LoadSpec.model_fields)
    assert set(fields) - NOT_SPEC <= spec_fields
    assert spec_fields - set(fields) - {"url"} == set(NOT_FLAGS)  # url: the argument
    for option in options:
        field = option.fields[0]
        if field in spec_fields and option.show_default:  # a default shown in --help
            assert option.default == LoadSpec.model_fields[field].default, field


def test_errors_name_the_flag_of_their_field() -> None:
    assert flag_of("warmup_s") == "--warmup-duration"  # as in run; --warmup still parses
    assert flag_of("rate_phases") == "--rate"
    assert flag_of("agents") == "--agents"
    assert flag_of("ray_address") == "--ray"
    assert flag_of("url") == "URL"
    res = CliRunner().invoke(command, ["http://127.0.0.1:9/", "--warmup", "soon"])
    assert res.exit_code == 2 and "--warmup-duration" in res.output


def test_bad_url_is_a_usage_error() -> None:
    res = CliRunner().invoke(command, ["https://127.0.0.1/"])
    assert res.exit_code == 2 and "URL" in res.output and "https" in res.output


def test_summary_and_json_file(refserver, tmp_path) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(
        command,
        [f"{refserver.url}/hello", "-c", "4", "-d", "0.5", "--warmup", "0.2", "--json", str(out)],
    )
    assert res.exit_code == 0, res.output
    for word in ("req/s", "Latency", "p99.9", "Status", "200:", "Errors", "none", "Connections"):
        assert word in res.output
    assert "CPU-us/request" in res.output and "Warm-up" in res.output
    r = LoadResult.from_json(out.read_text())
    assert r.requests > 0 and r.warmup is not None


def test_requests_per_connection_reconnects_every_n(refserver) -> None:
    args = [f"{refserver.url}/hello", "-c", "2", "-n", "100", "--requests-per-connection", "5"]
    res = CliRunner().invoke(command, [*args, "--json", "-"])
    assert res.exit_code == 0, res.output
    c = json.loads(res.stdout)["connections"]
    per = c["requests_per_connection"]
    # 100 requests, 5 a connection: 20 connections, plus up to one per connection (2) that a
    # reconnect started as the budget ran out opened without serving (timing)
    assert (per["max"], per["p50"]) == (5, 5) and 20 <= c["established"] <= 22, c
    bad = CliRunner().invoke(command, [*args, "--no-keepalive"])
    assert bad.exit_code == 2 and "--requests-per-connection" in bad.output, bad.output


def test_json_to_stdout_is_pure_json(refserver) -> None:
    p = _cli(f"{refserver.url}/hello", "-c", "2", "-d", "0.3", "--json", "-")
    stdout, stderr = p.communicate(timeout=30)
    assert p.returncode == 0, stderr
    d = json.loads(stdout)
    assert d["requests"] > 0
    assert "req/s" in stderr  # the text summary goes to stderr then


@pytest.mark.parametrize("io", ["epoll", "uring"])
def test_open_loop_summary(refserver, io: str) -> None:
    res = CliRunner().invoke(
        command, [f"{refserver.url}/hello", "--rate", "500", "-d", "0.5", "--io", io]
    )
    assert res.exit_code == 0, res.output
    assert f"(io: {io})" in res.output.splitlines()[0]
    for word in ("open loop", "corrected", "Service time", "Schedule lag", "offered"):
        assert word in res.output


def test_nothing_succeeded_exits_1(closed_port: int) -> None:
    res = CliRunner().invoke(command, [f"http://127.0.0.1:{closed_port}/", "-d", "0.3"])
    assert res.exit_code == 1
    assert "connect_refused" in res.output


def test_ctrl_c_prints_partial_results(refserver) -> None:
    p = _cli(f"{refserver.url}/hello", "-c", "4", "-d", "30", "--json", "-")
    _wait_for_load_thread(p.pid)
    time.sleep(1.0)
    t = time.monotonic()
    os.kill(p.pid, signal.SIGINT)
    stdout, stderr = p.communicate(timeout=10)
    # Bounds (issue 52, docs/contributing.md "Timing bounds in the suite"): from Ctrl-C to the
    # process's exit took 0.08-0.13 s on this project's 2-core VM (5 Dec 2026), at 2.9x slower
    # (a 1.45x slower core at 50% steal) 0.4 s; 8 s is exceeded only by 7.6 s of holds in
    # that window, where the host steals in slices of milliseconds: far rarer than 1 in
    # 10,000, and still 22 s short of the 30 s asked. The run's own length at the signal
    # (1.05-1.06 s measured): the load thread ran before the 1-s sleep began and a sleep
    # only ends late, so under 0.5 s only if the engine started its clock half a second
    # after its thread appeared, and over 5 s only if the test's thread or the signal was
    # held for 4 s: the same holds as above, far rarer than 1 in 10,000.
    assert time.monotonic() - t < 8.0
    assert p.returncode == 130, stderr
    d = json.loads(stdout)
    assert d["interrupted"] is True
    assert d["requests"] > 0
    assert 0.5 < d["duration_s"] < 5
    assert "INTERRUPTED" in stderr


def _peak_rss_mb(url: str) -> tuple[float, dict[str, Any]]:
    """Run the CLI against ``url`` for 2 s: its peak RSS in MB (``VmHWM``, read from /proc
    while it runs) and its JSON result.

    Not ``ru_maxrss`` from ``wait4``: the kernel carries the forking process's peak across
    ``exec`` into it, so a CLI started by a pytest process of 180 MB "peaked" at 180 MB
    (that was CI's failure); ``VmHWM`` belongs to the new program's memory alone."""
    p = _cli(url, "-c", "8", "-d", "2", "--timeout", "1", "-q", "--json", "-")
    peak_kb = 0

    def watch() -> None:
        nonlocal peak_kb
        while p.returncode is None:
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak_kb = max(peak_kb, int(line.split()[1]))
            except OSError:
                return  # reaped
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout, _ = p.communicate(timeout=60)
    watcher.join(timeout=5)
    return peak_kb / 1024, json.loads(stdout)


def test_memory_stays_bounded_against_a_huge_body(refserver) -> None:
    """A 10 GB body is streamed and dropped: the generator's peak RSS stays small."""
    peak_mb, d = _peak_rss_mb(f"{refserver.url}/misbehave/huge-body")
    # >= 100 MB went through: 4.03-4.34 GB were measured in the 2 s (5 Dec 2026), 1.39 GB
    # at 2.9x slower (docs/contributing.md, "Timing bounds in the suite"), 14x the floor.
    assert d["bytes_in"] > 100_000_000, d["bytes_in"]
    # each connection's body outlives the 1 s timeout; a loaded core 0 may also be slow to
    # send the head (header_timeout): both are timeouts, never a parse error
    assert "body_timeout" in d["error_classes"], d["error_classes"]
    assert d["error_classes"].keys() <= {"body_timeout", "header_timeout"}, d["error_classes"]
    # 46 MB here, the Python interpreter and rich included; 100+ MB went through, not kept
    assert 10 < peak_mb < 120, peak_mb
