"""The lowest layer: value types, codec, events, versions, errors, the run directory's
names and the plugin protocols. Nothing here imports any other effectbench package."""
