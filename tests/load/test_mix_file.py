"""Mix files (pywebbench.catalogue.mix) and ``pywebbench load URL --mix FILE``: parsing, one-line
errors naming the entry and field (exit 2, nothing written), verification of each endpoint
before the run, and a bounded run against the reference server on loopback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from pywebbench.catalogue.mix import MixEntry, MixFileError, load_mix, mix_to_toml, parse_mix
from pywebbench.commands.load import command
from pywebbench.load import LoadResult
from pywebbench.load.mix import fault_entry
from pywebbench.refserver import RefServer

MIX_TOML = """
[[request]]
name = "GET /hello"
weight = 6
path = "/hello?x=1"

[[request]]
name = "POST /hello"
weight = 2
method = "post"
path = "/hello"
body_file = "data/body.json"
headers = { "Content-Type" = "application/json" }

[[request]]
name = "GET /missing"
weight = 1
path = "/missing"
expect_status = 404
"""


@pytest.fixture()
def mix_file(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "body.json").write_bytes(b'{"a": 1}')
    path = tmp_path / "mix.toml"
    path.write_text(MIX_TOML)
    return path


def test_toml_entries_with_defaults_and_a_body_file(mix_file: Path) -> None:
    entries = load_mix(mix_file)
    assert [e.name for e in entries] == ["GET /hello", "POST /hello", "GET /missing"]
    assert entries[0] == MixEntry(
        name="GET /hello", weight=6, path="/hello?x=1", expect_status=[200]
    )
    assert entries[1].method == "POST" and entries[1].body == b'{"a": 1}'
    assert entries[1].headers == [("Content-Type", "application/json")]
    assert entries[2].expect_status == [404]


def test_json_and_toml_round_trip(mix_file: Path, tmp_path: Path) -> None:
    entries = load_mix(mix_file)
    again = parse_mix(mix_to_toml(entries, header="made by a test"), "x", tmp_path)
    assert again == entries
    doc = {"request": [{"name": "a", "weight": 1.5, "path": "/a", "body": "hi", "method": "PUT"}]}
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps(doc))
    (entry,) = load_mix(as_json)
    assert entry.weight == 1.5 and entry.body == b"hi" and entry.method == "PUT"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ('name = "a"\nweight = 0', 'request 2 ("a"): weight: must be > 0, got 0'),
        ('name = "a"\nweight = -2.5', 'request 2 ("a"): weight: must be > 0'),
        ('name = "a"', 'request 2 ("a"): weight: required'),
        ("weight = 1", "request 2: name: required"),
        ('name = "a"\nweight = 1\nmethod = "FETCH"', "request 2 (\"a\"): method: 'FETCH'"),
        ('name = "a"\nweight = 1\npath = "a"', 'request 2 ("a"): path: must start with'),
        (
            'name = "a"\nweight = 1\nbody_file = "nope.bin"',
            'request 2 ("a"): body_file: cannot read',
        ),
        ('name = "a"\nweight = 1\nbody = "x"\nbody_file = "y"', 'request 2 ("a"): body_file: give'),
        ('name = "a"\nweight = 1\nexpect_status = [42]', 'request 2 ("a"): expect_status: '),
        ('name = "a"\nweight = 1\nheaders = 3', 'request 2 ("a"): headers: expected a table'),
        ('name = "a"\nweight = 1\nwieght = 2', 'request 2 ("a"): wieght: unknown field'),
    ],
)
def test_bad_entries_are_one_line_naming_entry_and_field(
    tmp_path: Path, entry: str, message: str
) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(f'[[request]]\nname = "ok"\nweight = 1\n\n[[request]]\n{entry}\n')
    with pytest.raises(MixFileError) as caught:
        load_mix(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: {message}") and "\n" not in text, text
    out = tmp_path / "out.json"
    r = CliRunner().invoke(
        command, ["http://127.0.0.1:9", "--mix", str(path), "-n", "1", "--json", str(out)]
    )
    assert r.exit_code == 2, r.output
    assert r.output.strip().count("\n") == 0 and message in r.output, r.output
    assert not out.exists(), "nothing written"


def test_unreadable_files_are_one_line(tmp_path: Path) -> None:
    for name, text, message in (
        ("missing.toml", None, "cannot read"),
        ("bad.toml", "[[request]\n", "not valid TOML"),
        ("empty.toml", "", "no [[request]] entries"),
        ("bad.json", "{", "not valid JSON"),
    ):
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(MixFileError, match=re.escape(message)):
            load_mix(path)


@pytest.fixture(scope="module")
def server() -> object:
    with RefServer(cpus=[0]) as srv:
        yield srv


def test_load_mix_runs_every_endpoint_and_the_counts_add_up(
    server: RefServer, mix_file: Path, tmp_path: Path
) -> None:
    """10,000 requests (bounded: no timing). The shares: each endpoint's count is binomial
    with n = 10,000 and p its weight's share, standard deviation at most sqrt(0.25 / n) =
    0.005; a tolerance of 0.025 is 5 of them, a false failure of 5.7e-7 per endpoint (below
    1e-4 for the three). The draws are seeded, and every drawn request completes here, so a
    given engine build gets the same counts every time anyway."""
    out = tmp_path / "out.json"
    args = [server.url, "--mix", str(mix_file), "-n", "10000", "-c", "4", "--cpus", "1"]
    r = CliRunner().invoke(command, [*args, "--json", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert "Endpoint" in r.output and "GET /missing" in r.output and "p99.9" in r.output
    result = LoadResult.from_json(out.read_text())
    assert result.requests == 10_000 and result.errors == 0
    assert all(e.requests > 0 for e in result.endpoints)
    assert sum(e.requests for e in result.endpoints) == result.requests
    for e in result.endpoints:
        assert abs(e.requests / result.requests - e.weight_share) < 0.025, e.name


def test_verification_names_the_endpoint_that_fails(server: RefServer, tmp_path: Path) -> None:
    path = tmp_path / "mix.toml"
    path.write_text(
        '[[request]]\nname = "GET /hello"\nweight = 1\npath = "/hello"\n\n'
        '[[request]]\nname = "GET /gone"\nweight = 1\npath = "/gone"\n'
    )
    out = tmp_path / "out.json"
    r = CliRunner().invoke(
        command, [server.url, "--mix", str(path), "-n", "10", "--json", str(out)]
    )
    assert r.exit_code == 1
    assert 'verification: endpoint "GET /gone" (GET /gone): status 404, expected 200' in r.output
    assert "GET /hello" not in r.output and not out.exists()


def test_a_url_with_a_path_is_refused_with_a_mix(mix_file: Path) -> None:
    r = CliRunner().invoke(command, ["http://127.0.0.1:9/api?x=1", "--mix", str(mix_file)])
    assert r.exit_code == 2 and "every path comes from the mix" in r.output
    assert "/api?x=1" in r.output


def test_the_fault_phase_aims_at_the_heaviest_get_answering_2xx() -> None:
    """``run --faults`` with a mix (docs/faults.md): the heaviest GET entry expecting a 2xx
    (the first of equals; an entry expecting nothing named answers anything); none when the
    mix has no such GET."""

    def entry(name: str, weight: float, method: str = "GET", expect: list[int] | None = None):
        path = "/" + name.split("/", 1)[1]
        return MixEntry(name=name, weight=weight, method=method, path=path,
                        expect_status=[200] if expect is None else expect)  # fmt: skip

    post, health = entry("POST /items", 60, "POST", [201]), entry("GET /health", 30)
    gone, items = entry("GET /gone", 40, expect=[404]), entry("GET /items", 20, expect=[200, 304])
    assert fault_entry([post, gone, items, health]) is health
    assert fault_entry([post, gone, items, entry("GET /x", 10)]) is items  # 200 or 304
    assert fault_entry([entry("GET /a", 5), entry("GET /b", 5)]) == entry("GET /a", 5)
    assert fault_entry([post, gone, entry("HEAD /h", 9, "HEAD")]) is None
    assert fault_entry([post, entry("GET /any", 1, expect=[])]) == entry("GET /any", 1, expect=[])
