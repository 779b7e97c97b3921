"""bamboo."""
