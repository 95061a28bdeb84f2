"""The plugin registry over real distribution metadata written to a temp directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from effectbench.core.arm import Arm
from effectbench.core.provider import BenchmarkProvider
from effectbench.run.registry import (
    ARMS,
    PROVIDERS,
    DuplicatePluginWarning,
    PluginError,
    Registry,
    UnknownPlugin,
    format_plugin_table,
)

GOOD_MODULE = '''
import pathlib
pathlib.Path(__file__).with_suffix(".imported").touch()


class GoodProvider:
    name = "goodplug"
    version = "0.2"

    def tasks(self):
        return ()

    async def start(self):
        pass

    async def stop(self):
        pass

    async def provision(self, task, trial, params):
        raise NotImplementedError


def make_provider():
    return GoodProvider()


READY = GoodProvider()


class EchoArm:
    name = "echo"

    async def run(self, task, env):
        raise NotImplementedError


class HalfProvider:
    """Has a name and tasks but no lifecycle, and a sync start."""

    name = "half"
    version = "0.0"

    def tasks(self):
        return ()

    def start(self):
        pass
'''

BROKEN_MODULE = """
import pathlib
pathlib.Path(__file__).with_suffix(".imported").touch()
raise ImportError("brokenplug needs libfoo, which is not installed")
"""


def write_dist(
    site: Path, name: str, version: str, entry_points: dict[str, dict[str, str]]
) -> None:
    """A minimal installed distribution: METADATA plus entry_points.txt, as pip writes them."""
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    sections = [
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
        for group, eps in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, str]:
    """A site dir with a working plugin, a broken one and one pointing at a missing module.

    Module names are unique per test so sys.modules cannot hide a (non-)import.
    """
    suffix = uuid.uuid4().hex[:8]
    good, broken = f"goodplug_{suffix}", f"brokenplug_{suffix}"
    d = tmp_path / "site"
    d.mkdir()
    (d / f"{good}.py").write_text(GOOD_MODULE)
    (d / f"{broken}.py").write_text(BROKEN_MODULE)
    write_dist(
        d,
        "goodplug",
        "0.2",
        {
            PROVIDERS: {"goodplug": f"{good}:GoodProvider", "halfplug": f"{good}:HalfProvider"},
            ARMS: {"echo": f"{good}:EchoArm [fast]", "nomodule": "justaname"},
        },
    )
    write_dist(d, "brokenplug", "0.1", {PROVIDERS: {"brokenplug": f"{broken}:Provider"}})
    write_dist(d, "ghostplug", "1.0", {PROVIDERS: {"ghost": f"ghost_{suffix}.nowhere:Provider"}})
    monkeypatch.syspath_prepend(str(d))
    return d, good, broken


def test_listing_reads_metadata_and_imports_no_plugin(site: tuple[Path, str, str]) -> None:
    d, good, broken = site
    infos = Registry(paths=[str(d)]).list(PROVIDERS)
    assert [i.name for i in infos] == ["brokenplug", "ghost", "goodplug", "halfplug"]
    bp = infos[0]
    assert (bp.group, bp.value, bp.distribution, bp.version) == (
        PROVIDERS,
        f"{broken}:Provider",
        "brokenplug",
        "0.1",
    )
    assert good not in sys.modules and broken not in sys.modules
    assert not list(d.glob("*.imported"))


def test_loading_one_imports_only_that_one(site: tuple[Path, str, str]) -> None:
    d, good, broken = site
    reg = Registry(paths=[str(d)])
    provider = reg.provider("goodplug")
    assert isinstance(provider, BenchmarkProvider) and provider.name == "goodplug"
    assert (d / f"{good}.imported").exists()
    assert not (d / f"{broken}.imported").exists()
    assert reg.provider("goodplug") is not provider, (
        "a class entry point gives a fresh provider per request"
    )
    arm = reg.arm("echo")  # declared with an "[extras]" suffix
    assert isinstance(arm, Arm) and arm.name == "echo"
    with pytest.raises(
        PluginError, match="entry point justaname\\) is not a 'module:attribute' reference"
    ):
        reg.arm("nomodule")


def test_broken_plugins_are_failed_rows_and_the_others_still_load(
    site: tuple[Path, str, str],
) -> None:
    d, _, broken = site
    results = {r.info.name: r for r in Registry(paths=[str(d)]).load_all(PROVIDERS)}
    assert results["goodplug"].status == "loaded" and results["goodplug"].ok
    failed = results["brokenplug"]
    assert failed.status == "failed" and not failed.ok
    assert (
        failed.error
        == "failed to load: ImportError: brokenplug needs libfoo, which is not installed"
    )
    assert "ModuleNotFoundError" in (results["ghost"].error or "")
    half = results["halfplug"].error or ""
    assert results["halfplug"].status == "failed"
    assert "does not implement effectbench.provider.BenchmarkProvider" in half
    assert "'provision'" in half and "'stop'" in half and "'start' as an async method" in half
    assert all("\n" not in (r.error or "") for r in results.values())

    table = format_plugin_table(results.values())
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "DISTRIBUTION", "ENTRY", "POINT", "NOTE"]
    row = next(line for line in lines if line.startswith("brokenplug "))
    assert (
        "failed" in row
        and "brokenplug 0.1" in row
        and f"{broken}:Provider" in row
        and "ImportError" in row
    )


def test_loading_a_broken_plugin_by_name_raises_one_line_naming_it(
    site: tuple[Path, str, str],
) -> None:
    d, _, _ = site
    with pytest.raises(PluginError) as err:
        Registry(paths=[str(d)]).provider("brokenplug")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(
        "provider 'brokenplug' (distribution brokenplug 0.1, entry point brokenplug_"
    )
    assert message.endswith(
        "failed to load: ImportError: brokenplug needs libfoo, which is not installed"
    )


def test_module_attribute_references_accept_class_factory_and_instance(
    site: tuple[Path, str, str],
) -> None:
    d, good, _ = site
    reg = Registry(paths=[str(d)])
    from_class = reg.provider(f"{good}:GoodProvider")
    from_factory = reg.provider(f"{good}:make_provider")
    from_instance = reg.provider(f"{good}:READY")
    assert {type(p).__name__ for p in (from_class, from_factory, from_instance)} == {"GoodProvider"}
    assert from_instance is reg.provider(f"{good}:READY"), "an instance is used as is"
    assert reg.arm(f"{good}:EchoArm").name == "echo"
    notes = Registry().provider("effectbench_example_notes.provider:NotesProvider")
    assert notes.name == "example-notes"


def test_a_reference_to_the_wrong_kind_says_what_is_missing(site: tuple[Path, str, str]) -> None:
    d, good, _ = site
    reg = Registry(paths=[str(d)])
    with pytest.raises(
        PluginError, match=r"does not implement effectbench\.arm\.Arm: missing async method 'run'"
    ):
        reg.arm(f"{good}:GoodProvider")
    with pytest.raises(PluginError, match="calling it with no arguments failed: TypeError"):
        reg.provider("json:dumps")
    with pytest.raises(PluginError, match="failed to load: AttributeError"):
        reg.provider(f"{good}:Nope")
    with pytest.raises(PluginError, match="not a valid 'module:attribute' reference"):
        reg.provider("not a ref:")


def test_unknown_name_lists_what_is_available(site: tuple[Path, str, str]) -> None:
    d, _, _ = site
    with pytest.raises(UnknownPlugin) as err:
        Registry(paths=[str(d)]).provider("mockmedd")
    message = str(err.value)
    assert isinstance(err.value, PluginError) and "\n" not in message
    assert "unknown provider 'mockmedd'" in message
    assert "available: brokenplug, ghost, goodplug, halfplug" in message
    assert "module:attribute" in message
    with pytest.raises(UnknownPlugin, match="available: none installed"):
        Registry(paths=[str(d / "empty")]).arm("screen_only")


def test_duplicate_names_warn_and_the_first_on_the_path_wins(
    tmp_path: Path, site: tuple[Path, str, str]
) -> None:
    d, good, _ = site
    later = tmp_path / "later"
    write_dist(later, "copycat", "9.9", {PROVIDERS: {"goodplug": f"{good}:make_provider"}})
    reg = Registry(paths=[str(d), str(later)])
    with pytest.warns(
        DuplicatePluginWarning, match="'goodplug' is registered by both goodplug and copycat"
    ):
        infos = {i.name: i for i in reg.list(PROVIDERS)}
    assert infos["goodplug"].distribution == "goodplug"
    assert [i.distribution for i in reg.shadowed(PROVIDERS)] == ["copycat"]
    rows = {(r.info.name, r.info.distribution): r for r in reg.load_all(PROVIDERS)}
    assert rows[("goodplug", "goodplug")].status == "loaded"
    shadowed = rows[("goodplug", "copycat")]
    assert (
        shadowed.status == "shadowed" and shadowed.shadowed_by == f"goodplug ({good}:GoodProvider)"
    )
    assert "hidden by goodplug" in format_plugin_table([shadowed])


def test_a_plugin_that_exits_at_import_is_a_failed_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = f"exiter_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{mod}.py").write_text("import sys\nsys.exit(3)\n")
    write_dist(tmp_path, "exiter", "1.0", {ARMS: {"exiter": f"{mod}:Arm"}})
    monkeypatch.syspath_prepend(str(tmp_path))
    [result] = Registry(paths=[str(tmp_path)]).load_all(ARMS)
    assert (result.status, result.error) == ("failed", "failed to load: SystemExit: 3")


RAISING_MODULE = """
class Provider:
    version = "1"

    @property
    def name(self):
        raise RuntimeError("name lookup needs a licence server")

    def tasks(self):
        return ()

    async def start(self):
        pass

    async def stop(self):
        pass

    async def provision(self, task, trial, params):
        raise NotImplementedError
"""


def test_a_plugin_whose_member_raises_is_a_failed_row_and_the_others_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, site: tuple[Path, str, str]
) -> None:
    """Checking the protocol reads the plugin's properties; one that raises is the plugin's
    failure, never the listing's."""
    d, _, _ = site
    mod = f"raiser_{uuid.uuid4().hex[:8]}"
    (d / f"{mod}.py").write_text(RAISING_MODULE)
    write_dist(d, "raiser", "1.0", {PROVIDERS: {"raiser": f"{mod}:Provider"}})
    reg = Registry(paths=[str(d)])
    results = {r.info.name: r for r in reg.load_all(PROVIDERS)}
    assert results["goodplug"].ok
    assert results["raiser"].status == "failed"
    assert results["raiser"].error == (
        "does not implement effectbench.provider.BenchmarkProvider: missing attribute 'name' "
        "(reading it raised RuntimeError: name lookup needs a licence server)"
    )
    with pytest.raises(PluginError, match="reading it raised RuntimeError"):
        reg.provider("raiser")


def test_unknown_group_is_refused() -> None:
    with pytest.raises(PluginError, match="unknown plugin group"):
        Registry().list("effectbench.providerz")


def test_installed_environment_lists_lazily_and_isolates_a_broken_plugin(
    site: tuple[Path, str, str],
) -> None:
    """The real venv plus PYTHONPATH=<site>: what `effectbench providers` will see."""
    d, good, broken = site
    script = textwrap.dedent(
        """
        import json, sys
        from effectbench.run.registry import PROVIDERS, Registry, format_plugin_table
        watched = ["effectbench_mockmed", "effectbench_example_notes", sys.argv[1], sys.argv[2]]
        reg = Registry()
        names = reg.names(PROVIDERS)
        imported_by_listing = [m for m in watched if m in sys.modules]
        results = reg.load_all(PROVIDERS)
        print(json.dumps({
            "names": names,
            "imported_by_listing": imported_by_listing,
            "status": {r.info.name: [r.status, r.info.distribution, r.error] for r in results},
            "table": format_plugin_table(results),
        }))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(d)}
    proc = subprocess.run(
        [sys.executable, "-c", script, good, broken],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {"mockmed", "example-notes", "goodplug", "brokenplug"} <= set(out["names"])
    assert out["imported_by_listing"] == []
    status = out["status"]
    assert status["mockmed"][:2] == ["loaded", "effectbench"], out["table"]
    assert status["example-notes"][:2] == ["loaded", "effectbench-example-notes"], out["table"]
    assert status["goodplug"][0] == "loaded"
    assert status["brokenplug"][:2] == ["failed", "brokenplug"]
    assert "ImportError: brokenplug needs libfoo" in status["brokenplug"][2]
