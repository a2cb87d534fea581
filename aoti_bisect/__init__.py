"""aoti-bisect: rerun a failing AOTInductor repro under the debugging ladder and localise the fault."""
__version__ = "0.1.0"
