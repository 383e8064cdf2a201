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
