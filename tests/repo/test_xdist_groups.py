"""`make test` runs the suite with ``--dist loadgroup``: tests marked with one
``xdist_group`` share a worker, so a module's expensive fixture (a whole run, a shared
provider) is built once and a group's tests never run side by side. With pytest 9.2 and
pytest-xdist 3.8 every group was silently ignored (the worker's suffix never reached the
id); this fails when that happens again."""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("probe")
def test_a_grouped_test_carries_its_group_to_the_scheduler(request: pytest.FixtureRequest) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return  # not distributed (a single test run by hand): no scheduler to tell
    assert request.node.nodeid.endswith("@probe"), (
        f"{request.node.nodeid}: xdist_group is ignored with this pytest and pytest-xdist; "
        "pin a pair that works (pyproject.toml's dev group)"
    )
