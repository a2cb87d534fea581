"""Everything is in setup.cfg but one mapping that a setup.cfg cannot add to `packages = find:`.

scenarios/ stays at the repository root (the README runs `aoti-bisect scenarios/cpu/...` from a checkout);
the wheel carries it as the package data of aoti_bisect.scenario_data, so `scenarios list|check` work from
any installation (aoti_bisect/scenarios.py looks in both places).
"""
from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["aoti_bisect", "aoti_bisect.*"]), "aoti_bisect.scenario_data"],
      package_dir={"aoti_bisect.scenario_data": "scenarios"})
