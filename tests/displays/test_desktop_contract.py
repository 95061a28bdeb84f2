"""mockmed-substrates' desktop tasks against the provider contract every third-party
provider's tests inherit: a real display, client and accessibility bus per episode."""

from __future__ import annotations

import pytest

from effectbench.testing import ProviderContract

# One worker runs the class, so its checks share one started provider.
pytestmark = pytest.mark.xdist_group("mockmed-substrates-contract")


class TestMockMedDesktopContract(ProviderContract):
    provider_name = "mockmed-substrates"
    task_ids = (
        "mockmed-substrates::desktop::ok",
        "mockmed-substrates::desktop::timeout",
        "mockmed-substrates::desktop::stale",
    )
