"""Bring-your-own app: the flags turned into a framework (detection: tests/provision)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pywebbench.catalogue.base import WSGI
from pywebbench.catalogue.byo import (
    UserFramework,
    parse_requirements,
    parse_user_app,
    project_tags,
)


def test_bad_values_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--app 'nocolon'"):
        parse_user_app("nocolon", "wsgi", None, None, [], None, None)
    with pytest.raises(ValueError, match="--path 'x'"):
        parse_user_app("m:app", "wsgi", None, None, ["x"], None, None)
    with pytest.raises(ValueError, match="--interface 'rsgi'"):
        parse_user_app("m:app", "rsgi", None, None, [], None, None)
    with pytest.raises(ValueError, match="--requirements .*no such file"):
        parse_user_app("m:app", "wsgi", tmp_path / "nope.txt", None, [], None, None)
    with pytest.raises(ValueError, match="--expect-status 42"):
        parse_user_app("m:app", "wsgi", None, None, [], 42, None)
    with pytest.raises(ValueError, match="--project .*no such directory"):
        parse_user_app("m:app", "wsgi", None, tmp_path / "nope", [], None, None)


def test_flags_become_a_framework_without_building_anything(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'mine'\nversion = '1'\n")
    req = tmp_path / "req.txt"
    req.write_text("bottle==0.13.4\n")
    fw = parse_user_app("mine.web:app", "WSGI", req, tmp_path, ["/a", "/b", "/a"], 201, "ok")
    assert isinstance(fw, UserFramework)
    assert (fw.name, fw.interface, fw.app_dir) == ("app-mine.web.app", WSGI, tmp_path.resolve())
    assert fw.requirements(None) == ["bottle==0.13.4"]  # type: ignore[arg-type]
    assert [s.flags for s in fw.extra_installs(None)] == [  # type: ignore[arg-type]
        ("-e", str(tmp_path.resolve()))
    ]
    assert sorted(fw.workloads) == ["path:/a", "path:/b"]
    assert fw.user_workloads["path:/b"].expect_status == 201
    undetected = parse_user_app("mine.web:app", None, None, None, [], None, None)
    assert undetected.interface == "" and undetected.workloads == {"path:/"}


def test_parse_requirements(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("six==1.16.0\n")
    (tmp_path / "pkg").mkdir()
    req = tmp_path / "req.txt"
    req.write_text("-r base.txt\n\n# c\nbottle==0.13.4 # inline\n-e pkg\n")
    reqs, steps = parse_requirements(req)
    assert reqs == ["six==1.16.0", "bottle==0.13.4"]
    assert steps[0].flags == ("-e", str((tmp_path / "pkg").resolve()))
    req.write_text("--index-url https://example.org/simple\n")
    with pytest.raises(ValueError, match="--requirements .*req.txt:1: option '--index-url'"):
        parse_requirements(req)


def test_requirement_lines_are_checked_with_packaging(tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text(
        "Flask[async]>=3; python_version >= '3.9'\n"
        "mypkg @ https://example.org/mypkg-1.0.tar.gz\n"
        "git+https://example.org/repo.git#egg=repo\n"
        "./vendored/pkg\n"
    )
    reqs, _ = parse_requirements(req)
    assert len(reqs) == 4
    req.write_text("bottle==0.13.4\nbottle=>1\n")
    with pytest.raises(ValueError, match=r"--requirements .*req.txt:2: 'bottle=>1' is not a req"):
        parse_requirements(req)


def test_several_projects_are_named_after_their_directories(tmp_path: Path) -> None:
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    assert project_tags([]) == []
    assert project_tags([v1]) == [(v1, None)]  # one project: the name stays app-<app>
    assert project_tags([v1, v2 / "."]) == [(v1, "v1"), (v2, "v2")]
    assert parse_user_app("m.web:app", "wsgi", None, None, [], None, None).name == "app-m.web.app"
    v1.mkdir()
    tagged = parse_user_app("m.web:app", "wsgi", None, v1, [], None, None, tag="v1")
    assert (tagged.name, tagged.tag, tagged.project) == ("app-m.web.app@v1", "v1", v1)


def test_two_projects_need_two_directory_names(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "app", tmp_path / "b" / "app"
    with pytest.raises(ValueError) as err:
        project_tags([a, tmp_path / "v2", b])
    assert str(err.value) == (
        f"--project: two projects named 'app' ({a}, {b}); give them different directory names"
    )
    with pytest.raises(ValueError, match=r"^--project .*/a/app: given twice; for twins"):
        project_tags([a, tmp_path / "a" / ".." / "a" / "app"])
