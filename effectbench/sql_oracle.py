"""Old import path, kept so existing imports work: the code lives in
`effectbench.oracles.sqlite`."""

from effectbench.oracles.sqlite import *
