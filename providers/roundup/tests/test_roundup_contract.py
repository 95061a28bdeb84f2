"""Roundup against the provider contract every third-party provider's tests inherit, on
one task (each episode is a roundup-server of its own, so each costs about a second)."""

from __future__ import annotations

import pytest

from effectbench.testing import ProviderContract

# One worker runs the class, so its checks share one started Roundup (its pristine tracker
# takes seconds to build); each check may take minutes on a loaded machine.
pytestmark = [pytest.mark.xdist_group("roundup-contract"), pytest.mark.timeout(300)]


class TestRoundupContract(ProviderContract):
    provider_name = "roundup"
    task_ids = ("roundup::csrf::note::ok",)
