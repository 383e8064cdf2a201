"""Fixture projects of the loader tests live in tests/fixtures/projects/<name>/."""

from __future__ import annotations

from pathlib import Path

import pytest

from warehouse import Project, ProjectError

PROJECTS = Path(__file__).resolve().parents[2] / "fixtures" / "projects"
REPO_ROOT = Path(__file__).resolve().parents[3]


def load_problems(name: str, env: str = "local", **kwargs: object) -> ProjectError:
    """Load fixture project `name`, which must fail; return the error."""
    with pytest.raises(ProjectError) as info:
        Project.load(PROJECTS / name, env=env, environ=kwargs.pop("environ", {}), **kwargs)
    return info.value


def assert_problems(error: ProjectError, expected: list[tuple[str, str, list[str]]]) -> None:
    """`error` reports exactly the problems `expected`, each as (file, field, words its
    message holds), in any order."""
    unmatched = list(error.problems)
    for path, field, words in expected:
        hits = [
            p
            for p in unmatched
            if p.path == path and p.field == field and all(w in p.message for w in words)
        ]
        assert hits, f"no problem {path}: {field}: {words} in:\n{error}"
        unmatched.remove(hits[0])
    assert not unmatched, f"unexpected problems: {unmatched}"
