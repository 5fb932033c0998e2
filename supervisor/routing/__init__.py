"""Which CLI runs a step: the role's preference, its fallbacks, and what the metrics say."""
