"""What the sandbox mounts for an agent's program, and that it runs one where told."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from effectbench.agents.sandbox import probe, program_paths, wrap


def test_program_paths_mount_scripts_not_data_dirs(tmp_path: Path) -> None:
    script = tmp_path / "agent" / "main.js"
    script.parent.mkdir()
    script.write_text("")
    data = tmp_path / "data"
    data.mkdir()
    paths = program_paths(["/usr/bin/node", str(script), str(data), "--flag"])
    assert paths == [str(script.parent.resolve())]  # /usr is mounted anyway; data is not


def test_a_script_loose_in_tmp_is_mounted_alone_and_runs() -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".sh", dir="/tmp", delete=False) as f:
        f.write("#!/bin/sh\nls /tmp\n")
    script = Path(f.name)
    try:
        script.chmod(0o755)
        assert program_paths([str(script)]) == [str(script)]
        containment = probe()
        assert containment.available, containment.reason
        out = subprocess.run(
            wrap(containment, [str(script)]), capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == [script.name]  # the scratch tmpfs holds only the script
    finally:
        script.unlink()


def test_an_interpreter_outside_usr_brings_its_prefix() -> None:
    real = Path(sys.executable).resolve()
    paths = program_paths([str(real), "-c", "pass"])
    if str(real).startswith("/usr/"):
        assert paths == []
    else:
        assert paths == [str(real.parent.parent)]


def test_an_agent_under_a_parent_nobody_cannot_enter_still_runs(tmp_path: Path) -> None:
    """A checkout in root's 0700 home: as root the sandbox binds the program as nobody,
    which bwrap refused ("Can't find source path ...: Permission denied")."""
    home = tmp_path / "home"
    script = home / "checkout" / "agent.sh"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\necho agent ran\n")
    script.chmod(0o755)
    home.chmod(0o700)
    containment = probe()
    assert containment.available, containment.reason
    out = subprocess.run(
        wrap(containment, [str(script)]), capture_output=True, text=True, check=False
    )
    assert (out.returncode, out.stdout) == (0, "agent ran\n"), out.stderr


def test_an_agent_in_its_own_0700_directory_runs_with_the_run_directory_masked(
    tmp_path: Path,
) -> None:
    """``mktemp -d`` makes a 0700 directory; an agent there with the run directory inside
    failed at once ("bwrap: Can't mkdir .../run: Permission denied"): as nobody, bwrap
    could not see the run directory it masks, nor the agent its own files."""
    home = tmp_path / "mine"
    home.mkdir()
    script = home / "agent.sh"
    script.write_text(
        '#!/bin/sh\nhere="$(dirname "$0")"\nls -a "$here/run"\ncat "$here/notes.txt"\n'
    )
    script.chmod(0o755)
    (home / "notes.txt").write_text("the agent's own file\n")
    run = home / "run"
    run.mkdir()
    (run / "events.jsonl").write_text("the harness's log\n")
    home.chmod(0o700)
    containment = probe()
    assert containment.available, containment.reason
    out = subprocess.run(
        wrap(containment, [str(script)], hide=[str(run)]),
        capture_output=True,
        text=True,
        check=False,
    )
    # the run directory is there but empty (masked); the agent's own files are readable
    assert (out.returncode, out.stdout) == (0, ".\n..\nthe agent's own file\n"), out.stderr
    assert home.stat().st_mode & 0o777 == 0o701  # search only: nobody still lists nothing
