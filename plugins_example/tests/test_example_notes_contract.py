"""The example provider against effectbench's provider contract: the checks every
provider must pass, inherited by subclassing (docs/writing-a-provider.md)."""

from __future__ import annotations

from effectbench.testing import ProviderContract


class TestNotesContract(ProviderContract):
    provider_name = "example-notes"
    task_ids = ("notes::save",)
