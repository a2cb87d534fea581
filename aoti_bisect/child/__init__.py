"""Code that runs inside the repro's interpreter or process, never in aoti-bisect's own.

Each module here is started by path (`python <module file>`), so it must import nothing of aoti_bisect
and nothing the repro's environment may lack; importing this package in the parent imports no torch.
"""
