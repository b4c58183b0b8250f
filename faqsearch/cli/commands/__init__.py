"""The commands, by area."""
