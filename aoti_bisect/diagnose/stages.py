"""The ladder's stages, in order: the one list the CLI offers and the ladder climbs."""
STAGES = ("baseline", "sanity", "determinism", "trace", "fakecheck", "memcheck", "inspect", "eager")
