"""MockMed against the provider contract every third-party provider's tests inherit."""

from __future__ import annotations

import pytest

from effectbench.testing import ProviderContract

# One worker runs the class, so its checks share one started MockMed.
pytestmark = pytest.mark.xdist_group("mockmed-contract")


class TestMockMedContract(ProviderContract):
    provider_name = "mockmed"
    task_ids = ("mockmed::ok", "mockmed::timeout", "mockmed::stale")
