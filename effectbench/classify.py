"""Old import path, kept so existing imports work: the code lives in
`effectbench.scoring.classify`."""

from effectbench.scoring.classify import *
