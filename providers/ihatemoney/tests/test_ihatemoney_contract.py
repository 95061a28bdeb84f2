"""I Hate Money against the provider contract every third-party provider's tests inherit,
on one task (each episode is a Flask server of its own, so each costs seconds)."""

from __future__ import annotations

import pytest

from effectbench.testing import ProviderContract

# One worker runs the class, so its checks share one started provider (its pristine
# ledger takes seconds to seed); each check may take minutes on a loaded machine.
pytestmark = [pytest.mark.xdist_group("ihatemoney-contract"), pytest.mark.timeout(300)]


class TestIHateMoneyContract(ProviderContract):
    provider_name = "ihatemoney"
    task_ids = ("ihatemoney::expense::ok",)
