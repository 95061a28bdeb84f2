"""MockMed against the provider contract every third-party provider's tests inherit."""

from __future__ import annotations

from effectbench.testing import ProviderContract


class TestMockMedContract(ProviderContract):
    provider_name = "mockmed"
    task_ids = ("mockmed::ok", "mockmed::timeout", "mockmed::stale")
