"""Running an evaluation: options, the plan, the scheduler, the plugin registry and the
guard of a run's output directory."""
