"""The ticket report: secrets never leave, size stays under GitHub's limit, hostile logs render as intended."""
import json
import os
import subprocess
import sys
import tarfile

from markdown_it import MarkdownIt

from aoti_bisect.report.markdown import MD_LIMIT
from aoti_bisect.report.redact import MASK, Redactor

SECRET = "s3cr3t-Value-9f8e7d6c5b4a"
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def bisect(tmp_path, body, *args, env=None):
    script = tmp_path / "repro.py"
    script.write_text(body)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "--stages", "baseline", "--runs", "1",
                           "--out", str(out), *args], capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=600)
    return proc, out


def test_redactor_masks_formats_assignments_and_values():
    r = Redactor.from_env({"MY_API_TOKEN": SECRET, "PATH": "/usr/bin"})
    text = f"token {SECRET} and {GH_TOKEN} and AWS_SECRET_ACCESS_KEY=abcdefgh12345678 PATH=/usr/bin"
    cleaned = r(text)
    assert SECRET not in cleaned and GH_TOKEN not in cleaned and "abcdefgh12345678" not in cleaned
    assert cleaned.count(MASK) == 3 and "PATH=/usr/bin" in cleaned


def test_planted_secrets_never_reach_report_or_bundle(tmp_path):
    body = ("import os\n"
            "print('env token:', os.environ['MY_API_TOKEN'])\n"
            f"print('leaked: {GH_TOKEN}')\n"
            "raise SystemExit('failed with HF_TOKEN=' + os.environ['MY_API_TOKEN'])\n")
    proc, out = bisect(tmp_path, body, "--redact-paths", env={"MY_API_TOKEN": SECRET, "CUDA_AUTH_KEY": SECRET})
    assert proc.returncode == 1, proc.stderr
    assert SECRET in (out / "runs" / "baseline-000" / "output.log").read_text()  # raw logs stay local
    bundle = tmp_path / "b.tar.gz"
    subprocess.run([sys.executable, "-m", "aoti_bisect", "report", str(out), "--bundle", str(bundle),
                    "--redact-paths"], capture_output=True, text=True, env=dict(os.environ, MY_API_TOKEN=SECRET))
    texts = [(out / "report.md").read_text(), (out / "report.json").read_text()]
    with tarfile.open(bundle) as tar:
        names = tar.getnames()
        texts += [tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()]
    assert any(n.endswith("runs/baseline-000/output.log") for n in names)
    for text in texts:
        assert SECRET not in text and GH_TOKEN not in text
    assert MASK in (out / "report.md").read_text()


def test_a_gigabyte_log_still_gives_a_report_under_the_limit(tmp_path):
    body = ("import os\n"
            "line = b'[ before_launch: cpp_fused_x_0 ] ' + b'y' * 990 + b'\\n'\n"
            "for _ in range(1 << 20):\n"
            "    os.write(1, line)\n"
            "raise SystemExit('non-finite output')\n")
    proc, out = bisect(tmp_path, body)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["stages"][0]["excerpt"]["bytes"] < 40 << 20  # capped on disk, not 1 GiB
    md = (out / "report.md").read_text()
    assert len(md) <= MD_LIMIT and "<details>" in md and "non-finite output" in md


def test_hostile_log_renders_as_intended_in_gfm(tmp_path):
    # Each printed line is a key line of the log ("Error"), so report.md shows it in the baseline's excerpt.
    body = ("print('Error | a | b |\\nError |---|---|\\nError ```\\nError ````python\\n"
            "Error <details><summary>x</summary>\\nError </details>\\nError `tick`')\n"
            "raise SystemExit('bad | value ``` <details> `x`')\n")
    proc, out = bisect(tmp_path, body)
    assert proc.returncode == 1, proc.stderr
    md = (out / "report.md").read_text()
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(md)
    tables = [t for t in tokens if t.type == "table_open"]
    assert len(tables) == 2  # stages, environment (the summary is a list): the log's "| a | b |" made none
    details = [t.content for t in tokens if t.type == "html_block" and t.content.startswith("<details>")]
    # ours (compiles, environment, the log's key lines); the log's <details> stayed text in a fence
    assert len(details) == 3 and any("Log key lines" in d for d in details)
    fences = [t.content for t in tokens if t.type == "fence"]
    assert any("Error <details><summary>x</summary>" in f and "Error ````python" in f for f in fences)
    cells = [t.content for t in tokens if t.type == "inline"]
    assert any("bad | value ``` <details> `x`" in _unescape(c) for c in cells)
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    assert html.count("<table>") == 2


def _unescape(cell: str) -> str:
    return cell.replace("\\|", "|").replace("\\`", "`").replace("&lt;", "<").replace("\\\\", "\\")
