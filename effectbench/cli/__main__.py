"""``python -m effectbench.cli``: the same command as ``effectbench``."""

import sys

from effectbench.cli.commands import main

sys.exit(main())
