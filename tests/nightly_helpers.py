"""Helpers shared by the tests/test_nightly_*.py files: seeded sets, the CLI as a real process, summaries."""
import json
import os
import random
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEEDED = os.path.join(HERE, "repros", "seeded_flaky.py")


def seeded_failures(p, seed, indices):
    """What tests/repros/seeded_flaky.py does with each run index, computed without running it."""
    return sum(random.Random(seed * 1_000_003 + i).random() < p for i in indices)


def manifest(path, entries):
    """entries: name -> (script, args) written as [[repro]] tables."""
    lines = []
    for name, (script, args) in entries.items():
        lines += ["[[repro]]", f'name = "{name}"', f'script = "{script}"',
                  "args = [" + ", ".join(f'"{a}"' for a in args) + "]", "timeout = 60", ""]
    path.write_text("\n".join(lines))
    return str(path)


def seeded_set(path, repros):
    """repros: name -> (p, seed[, mode])."""
    return manifest(path, {name: (SEEDED, args) for name, args in repros.items()})


def tool(cwd, *args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def nightly(tmp_path, set_path, out, *args, db="history.sqlite3", **kw):
    return tool(tmp_path, "nightly", set_path, "--out", out, "--db", db, *args, **kw)


def summary(tmp_path, out):
    return json.loads((tmp_path / out / "summary.json").read_text())


def by_name(data):
    return {r["name"]: r for r in data["repros"]}




def junit_checked(path):
    from junitparser import JUnitXml
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(os.path.join(HERE, "data", "jenkins-xunit-junit-10.xsd")))
    doc = etree.parse(str(path))
    schema.assertValid(doc)
    cases = {}
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            cases[case.name] = case
    return doc, cases
