"""Guarded file access, one module for each thing guarded: own.py (what a child wrote, read only as the run's own
file), runfolder.py (a run folder as report, minify and a bundle read it), out.py (the --out folder, claimed and
locked) and write.py (files written into a run, never through a planted link)."""
