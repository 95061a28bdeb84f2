"""One options object: every run default, validated once, in words and not flags."""

from __future__ import annotations

import attrs
import pytest

from effectbench.api import DEFAULT_CONCURRENCY, DEFAULT_ORACLE_RETRIES
from effectbench.cli.commands import flag_message
from effectbench.run.options import DEFAULTS, OptionsError, RunOptions
from effectbench.run.scheduler import SchedulerOptions


def test_the_defaults_live_in_one_place() -> None:
    assert SchedulerOptions is RunOptions
    assert (DEFAULTS.concurrency, DEFAULTS.oracle_retries, DEFAULTS.provider_timeout) == (
        32,
        3,
        60.0,
    )
    assert (DEFAULT_CONCURRENCY, DEFAULT_ORACLE_RETRIES) == (
        DEFAULTS.concurrency,
        DEFAULTS.oracle_retries,
    )
    assert attrs.has(RunOptions) and RunOptions.__setattr__ is not object.__setattr__  # frozen


@pytest.mark.parametrize(
    ("bad", "words", "flag"),
    [
        ({"concurrency": 0}, "concurrency must be an integer", "--concurrency must be an integer"),
        (
            {"oracle_retries": -1},
            "the number of oracle re-reads must be >= 0",
            "--oracle-retries must be >= 0",
        ),
        (
            {"provider_timeout": 0.0},
            "the provider timeout must be a finite",
            "--provider-timeout must be a finite",
        ),
        (
            {"episode_timeout": float("inf")},
            "the episode timeout must be",
            "--episode-timeout must be",
        ),
    ],
)
def test_messages_name_the_option_in_words_and_the_cli_names_its_flag(
    bad: dict[str, float], words: str, flag: str
) -> None:
    with pytest.raises(OptionsError) as caught:
        RunOptions(**bad)  # type: ignore[arg-type]
    assert str(caught.value).startswith(words) and "--" not in str(caught.value)
    assert flag_message(caught.value).startswith(flag)
