"""Deciding: the ladder of stages, the walk back to the first bad kernel, and what they conclude."""
