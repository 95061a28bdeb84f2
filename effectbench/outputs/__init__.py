"""What a run leaves behind besides its log: the derived artifacts, built from the log
in one pass (or two processes for large logs)."""
