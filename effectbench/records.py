"""Old import path, kept so existing imports work: the code lives in
`effectbench.scoring.records`."""

from effectbench.scoring.records import *
