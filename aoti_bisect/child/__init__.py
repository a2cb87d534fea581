"""Code that runs inside the repro's interpreter or process, never in aoti-bisect's own.

Each module here is started or loaded by path (probe.py as `python probe.py`; hook/ through a sitecustomize on
the run's PYTHONPATH), so it must import nothing of aoti_bisect and nothing the repro's environment may lack;
importing this package in the parent imports no torch.
"""
