"""Roundup against the provider contract every third-party provider's tests inherit, on
two tasks (each episode is a roundup-server of its own)."""

from __future__ import annotations

from effectbench.testing import ProviderContract


class TestRoundupContract(ProviderContract):
    provider_name = "roundup"
    task_ids = ("roundup::csrf::note::ok", "roundup::nocsrf::status::stale")
