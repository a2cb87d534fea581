"""The README's example from a real run: bisects a bundled scenario, keeps what it printed and wrote in
docs/examples/, and rewrites the README's generated blocks from those files, so the README cannot drift from
what aoti-bisect really does.

    python docs/examples/refresh.py            # bisect nan_after_matmul, then refresh docs/examples/ and the README
    python docs/examples/refresh.py --readme   # only the README's blocks, from the files already in docs/examples/
    python docs/examples/refresh.py --check    # exit 1 where the README's blocks differ from them (a test runs this)

The run goes to /tmp/aoti-bisect-example, which must not exist: report.md's rerun.sh links name that folder.
A generated block sits between `<!-- example:NAME -->` and `<!-- /example:NAME -->` in README.md.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from aoti_bisect.report.markdown import evidence_chain  # noqa: E402
from aoti_bisect.report.model import VERDICT_EXIT  # noqa: E402
from aoti_bisect.report.record import ReportRecord  # noqa: E402
from aoti_bisect.verdict import Verdict  # noqa: E402

EXAMPLES = os.path.join(ROOT, "docs", "examples")
README = os.path.join(ROOT, "README.md")
SCENARIO = "nan_after_matmul"
OUT = "/tmp/aoti-bisect-example"
BLOCK = re.compile(r"(<!-- example:(?P<name>[\w-]+) -->\n).*?(<!-- /example:(?P=name) -->)", re.S)


def bisect(scenario: str, out: str) -> None:
    """One real bisection, as the README shows it; its console (stderr's progress and stdout's answer, in the order
    a terminal shows them: aoti-bisect flushes every line), report.md and report.json land in docs/examples/."""
    if os.path.exists(out):
        sys.exit(f"refresh: {out} exists; remove it first (the report's links name this folder)")
    script = f"scenarios/cpu/{scenario}.py"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", script, "--out", out], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(EXAMPLES, f"{scenario}.console.txt"), "w") as f:
        f.write(proc.stdout)
    for name in ("report.md", "report.json"):
        shutil.copyfile(os.path.join(out, name), os.path.join(EXAMPLES, f"{scenario}.{name}"))


def blocks(scenario: str) -> dict[str, str]:
    """The README's generated blocks, from the files of the scenario's example."""
    def read(name: str) -> str:
        with open(os.path.join(EXAMPLES, f"{scenario}.{name}")) as f:
            return f.read()
    report = json.loads(read("report.json"))
    code = VERDICT_EXIT[Verdict(report["verdict"])]
    console = (f"$ aoti-bisect scenarios/cpu/{scenario}.py --out {report['run_dir']}\n{read('console.txt')}"
               f"$ echo $?\n{code}\n")
    first = read("report.md").split("\n## ")[0].rstrip()
    evidence = "".join(f"{i}. {e}\n" for i, e in enumerate(evidence_chain(ReportRecord.from_json(report).culprit), 1))
    return {"console": f"```\n{console}```\n", "first-screen": f"```markdown\n{first}\n```\n", "evidence": evidence}


def refreshed(text: str, new: dict[str, str]) -> str:
    return BLOCK.sub(lambda m: m.group(1) + new[m.group("name")] + m.group(3), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help="only rewrite the README from docs/examples/")
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs from docs/examples/")
    args = parser.parse_args()
    if not (args.readme or args.check):
        bisect(SCENARIO, OUT)
    with open(README) as f:
        text = f.read()
    new = refreshed(text, blocks(SCENARIO))
    if args.check:
        if new != text:
            print("refresh: README.md's example differs from docs/examples/: run docs/examples/refresh.py --readme",
                  file=sys.stderr)
            return 1
        return 0
    with open(README, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
