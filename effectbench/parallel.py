"""Old import path, kept so existing imports work: the code lives in
`effectbench.outputs.parallel`."""

from effectbench.outputs.parallel import *
