"""Which code a run runs: the provider and arms a request names, resolved once, and the
distribution and version of each, which the plan records (verify reads them back).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from effectbench.core.arm import Arm
from effectbench.core.capabilities import ArmCapabilities, ProviderCapabilities
from effectbench.core.provider import BenchmarkProvider
from effectbench.core.versions import (
    HARNESS_DISTRIBUTION,
    HARNESS_PACKAGES,
    PACKAGE_VERSION,
    harness_shipped,
)
from effectbench.run.checks import check_plugin_object
from effectbench.run.plan import Plan, ProviderInfo, build_plan
from effectbench.run.request import ArmLike, ProviderLike, RunError, RunRequest

if TYPE_CHECKING:
    from effectbench.run.registry import Registry

__all__ = ["Plugins", "arm_version", "plan_of", "resolve"]


@attrs.frozen
class Plugins:
    """The provider and arms of a run, each with the reference it was named by (None for
    an object passed in), in the request's order."""

    provider: BenchmarkProvider
    provider_ref: str | None
    arms: Mapping[str, Arm]
    arm_refs: tuple[str | None, ...]

    def with_arms(self, arms: Mapping[str, Arm]) -> Plugins:
        """The same plugins with the arms as the checks configured them (isolation)."""
        return attrs.evolve(self, arms=dict(arms))


def resolve(request: RunRequest, registry: Registry) -> Plugins:
    """Load what the (settled) request names; an object is checked like a loaded plugin."""
    assert request.provider is not None and request.arms is not None  # settled
    provider, ref = _provider(request.provider, registry)
    arms, refs = _arms(request.arms, registry)
    return Plugins(provider, ref, arms, tuple(refs))


def _provider(provider: ProviderLike, registry: Registry) -> tuple[BenchmarkProvider, str | None]:
    if isinstance(provider, str):
        return registry.provider(provider), provider
    if not isinstance(provider, BenchmarkProvider):
        raise RunError(
            f"{provider!r} is not a BenchmarkProvider (needs name, version, tasks, start, stop, "
            "provision)"
        )
    check_plugin_object(provider, "provider", f"provider {provider.name!r}")
    return provider, None


def _arms(arms: Sequence[ArmLike], registry: Registry) -> tuple[dict[str, Arm], list[str | None]]:
    out: dict[str, Arm] = {}
    refs: list[str | None] = []
    for item in arms:
        if isinstance(item, str):
            arm = registry.arm(item)
            ref: str | None = item
        elif isinstance(item, Arm):
            arm, ref = item, None
            check_plugin_object(arm, "arm", f"arm {arm.name!r}")
        else:
            raise RunError(f"{item!r} is not an Arm (needs a name and an async run(task, env))")
        if arm.name in out:
            hint = ""
            if isinstance(item, str) and item.startswith(arm.name.partition(":")[0] + ":"):
                # a protocol agent named after its file (exec:agent): it can be named apart
                hint = f" (agents whose files share a name: name each, --arm NAME={item})"
            raise RunError(f"arm {arm.name!r} is named twice; give each arm once{hint}")
        out[arm.name] = arm
        refs.append(ref)
    return out, refs


def plan_of(request: RunRequest, plugins: Plugins, registry: Registry) -> Plan:
    """The plan of a settled request: the provider's tasks, the arms, the trials, and the
    code behind each plugin."""
    import importlib_metadata

    from effectbench.run.registry import ARMS, PROVIDERS

    prov = plugins.provider
    try:
        tasks = list(prov.tasks())
    except Exception as exc:  # noqa: BLE001 - third-party code; reported as one line
        raise RunError(
            f"provider {prov.name!r} failed to list its tasks: {type(exc).__name__}: {exc}"
        ) from None
    # Scanning every installed distribution costs ~45 ms: only for plugins given as
    # objects or module:attribute references, which entry-point metadata does not cover.
    dists = functools.cache(importlib_metadata.packages_distributions)
    prov_dist, _ = _shipped_by(prov, plugins.provider_ref, PROVIDERS, registry, dists)
    arm_versions = {
        name: arm_version(arm, _shipped_by(arm, ref, ARMS, registry, dists))
        for (name, arm), ref in zip(plugins.arms.items(), plugins.arm_refs, strict=True)
    }
    assert request.trials is not None  # settled
    return build_plan(
        ProviderInfo(prov.name, prov.version, prov_dist),
        tasks,
        list(plugins.arms),
        request.trials,
        request.task_globs or (),
        refs={"provider": plugins.provider_ref, "arms": list(plugins.arm_refs)},
        arm_versions=arm_versions,
        fixture=ProviderCapabilities.of(prov).fixture,
        limit=request.limit,
    )


def _shipped_by(
    obj: object,
    ref: str | None,
    group: str,
    registry: Registry,
    dists: Callable[[], Mapping[str, list[str]]],
) -> tuple[str | None, str | None]:
    """(distribution, version) of the code behind a plugin: from its entry point's metadata
    when it was named, else from the distribution that ships its top-level module."""
    import importlib_metadata

    info = registry.info(group, ref) if ref is not None else None
    if info is not None and info.distribution is not None:
        return info.distribution, info.version
    names = dists().get(type(obj).__module__.split(".")[0])
    if not names:
        return None, None
    dist = min(names)
    try:
        return dist, importlib_metadata.version(dist)
    except importlib_metadata.PackageNotFoundError:
        return dist, None


def arm_version(arm: Arm, shipped: tuple[str | None, str | None]) -> str | None:
    """What code an arm is: its own ``version`` attribute, else ``dist==version`` of the
    distribution shipping it, else None (unknown, which still differs from a known one).
    An arm from the harness's own packages is ``effectbench==<version>`` even where no
    distribution maps them (an editable install): verify counts it as harness code, so
    an arm from anywhere else may not claim that version (a RunError)."""
    module = type(arm).__module__
    harness = module.split(".")[0] in HARNESS_PACKAGES
    own = ArmCapabilities.of(arm).version
    dist, version = shipped
    if dist is None and harness:
        dist, version = HARNESS_DISTRIBUTION, PACKAGE_VERSION
    found = dist if dist is None or version is None else f"{dist}=={version}"
    if own is not None:
        found = own
    if not harness and harness_shipped(found):
        raise RunError(
            f"arm {arm.name!r} gives its version as {found!r}, the harness's own, but its "
            f"code ({module}) is not the harness's: give it a version of its own"
        )
    return found
