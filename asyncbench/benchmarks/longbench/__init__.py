"""longbench."""
