"""Safe by construction (issue #38): each class of defect is closed where the code makes it impossible, and tested
there: one Markdown writer (report/markdown.py md_cell), one guarded reader and writer of
a run folder (files/runfolder.RunFolder), no pickle from a run folder, secrets in names and two more formats, small faults.
Property tests (hypothesis) drive hostile text through the writer and hostile JSON through the reader."""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from aoti_bisect.exits import UsageFailure
from aoti_bisect.files.own import MAX_JSON_DEPTH
from aoti_bisect.files.runfolder import RunFolder, RunFolderError
from aoti_bisect.files.write import report_crash
from aoti_bisect.report.markdown import md_cell, md_code, render_markdown
from aoti_bisect.report.model import Report
from aoti_bisect.report.record import ReportRecord
from aoti_bisect.report.redact import MASK, Redactor

DATA = os.path.join(os.path.dirname(__file__), "data", "report-nan_after_matmul.json")
# Made up here, in the shapes of gitleaks' rules (none is a real credential).
GH_TOKEN = "ghp_" + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN5oP"
VAULT_TOKEN = "hvs." + "CAESIJ8q" + "Rk2Lm9Np4Qs7Tv1Wx5Yz8Ab3Cd6Ef0Gh2Ij4Kl6Mn8Op0Qr2St4Uv6Wx8Yz0" * 2
AGE_KEY = "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" + "QPZRY9X8GF2TVDW0S3JN54KHCE"


def cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


def one_line(proc) -> bool:
    return "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1


def run_folder(tmp_path, edit=None):
    """A finished run's folder: the captured report.json of a real run (a reproduced nan_inf)."""
    run = tmp_path / "run"
    run.mkdir()
    data = json.load(open(DATA))
    if edit:
        edit(data)
    (run / "report.json").write_text(json.dumps(data))
    return run


# --- 1. Live markup: one writer for what is pasted into GitHub ------------------------------------------------

# What GitHub makes live in a text node (its filters are Ruby regexes with ASCII \w), and what hides or reorders.
MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
REFERENCE = re.compile(r"#\d|(?i:GH-)\d")
HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200d\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def live_markup(markdown: str, ours: frozenset = frozenset()) -> list[str]:
    """What Markdown holding child text would show other than that text: tags (but `ours`), mentions,
    references, hidden characters."""
    rendered = MD.render(markdown)
    tags = set(re.findall(r"</?([a-z0-9]+)", rendered)) - {"p", "br"} - ours
    # GitHub links no mention or reference inside code.
    text = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<code>.*?</code>", "", rendered, flags=re.S)))
    return (sorted(tags) + MENTION.findall(text) + REFERENCE.findall(text)
            + [repr(c) for c in HIDDEN.findall(markdown)])


HOSTILE = ["@octocat please look", "cc @pytorch/dev-infra", "see #123 and pytorch/pytorch#7 and GH-5",
           "[click here](https://evil.example/x)", "![tracker](https://evil.example/p.png)", "&lt;b&gt; &#64;x",
           "*bold* _em_ ~~gone~~ `code`", "<img src=x onerror=alert(1)>", "<details><summary>x</summary>",
           "file\u202egnp.exe", "zero\u200bwidth\ufeffjoin\u2066x\u2069", "$\\sqrt{x}$", "a | b | c",
           "ESC\x1b[31mred"]


@pytest.mark.parametrize("text", HOSTILE)
def test_child_text_renders_as_typed_with_nothing_live(text):
    assert live_markup("x: " + md_cell(text)) == []


def test_inline_code_of_child_text_is_one_span_with_nothing_live():
    code = md_code("a`b``c | @user \u202e")
    rendered = MD.render(f"| {code} |\n|---|\n")
    assert rendered.count("<code>") == 1 and "@user" in rendered and "\u202e" not in rendered


def test_a_hostile_message_reaches_report_md_with_nothing_live(tmp_path):
    message = " ".join(HOSTILE)
    run = run_folder(tmp_path, lambda d: d["signature"].update(message=message))
    md = render_markdown(Report.load(str(run)).record)
    line = next(line for line in md.splitlines() if line.startswith("- **Message**"))
    assert live_markup(line.removeprefix("- **Message**:")) == []


def test_the_minified_section_is_redacted_escaped_and_honours_redact_paths(tmp_path):
    run = run_folder(tmp_path)
    home = os.path.expanduser("~")
    (run / "minify").mkdir()
    (run / "minify" / "minify.json").write_text(json.dumps({
        "status": "verified", "message": f"minified in {home}/x with {GH_TOKEN} @octocat #12 \x1b[2J",
        "nodes_before": 9, "nodes_after": 2, "ops_after": ["[x](y)"], "repro": f"{home}/m/repro.py",
        "verified": True}))
    proc = cli("report", str(run), "--format", "md", "--redact-paths")
    assert proc.returncode == 1, proc.stderr
    section = proc.stdout[proc.stdout.index("## Minified repro"):]
    # the next section or folded block, where one follows
    ends = [i for i in (section.find("\n## ", 3), section.find("\n<details>")) if i >= 0]
    section = section[:min(ends)] if ends else section
    assert GH_TOKEN not in section and MASK.replace("<", "&lt;") in section
    assert home not in section and "\x1b" not in section
    assert live_markup(section, frozenset({"h2", "ul", "li", "strong", "code"})) == []


def test_a_hostile_repro_name_and_message_reach_the_nightly_summary_with_nothing_live():
    from aoti_bisect.nightly.render import render_junit
    from aoti_bisect.nightly.render import render_markdown as render_night

    evil = " ".join(HOSTILE)
    rate = {"runs": 2, "failures": 2, "rate": 1.0, "ci95": [0.34, 1.0]}
    signature = {"kind": "segfault", "phase": "run", "fingerprint": "`ab|c", "new": True, "count": 2,
                 "first_seen": None, "last_seen": None, "message": evil}
    night = {"worse": [], "set": "/sets/" + evil, "batch": "b`@x", "hosts": [{"torch": evil}], "complete": False,
             "problems": [evil], "window": 7, "alpha": 0.01, "db": "h@x.db", "started": "2026-11-26T00:00:00",
             "repros": [{"name": evil, "change": {"text": evil, "change": "same"}, "bisect_report": "a b>/r.md",
                         "memcheck": None, "status": "reproduced", "rate": rate, "signatures": [signature],
                         "duration_s": 1.0, "skipped": None, "infra_errors": 0}]}
    md = render_night(night)
    ours = frozenset({"h1", "strong", "blockquote", "table", "thead", "tbody", "tr", "th", "td", "code", "a", "h2"})
    assert live_markup(md, ours) == []
    assert MD.render(md).count("<a ") == 1  # ours: the ladder report's link, whole
    assert not HIDDEN.findall(render_junit(night))


# --- 2. Writes through links, reads out of the run folder -----------------------------------------------------

def victim(tmp_path):
    """A folder of the user's own that a planted link points at: nothing may change in it."""
    folder = tmp_path / "victim"
    (folder / "candidates").mkdir(parents=True)
    for name in ("repro.py", "minify.json", "graph.json", "values.pt", "candidates/keep.txt"):
        (folder / name).write_text("mine\n")
    return folder


def named_repro(tmp_path) -> tuple[str, ...]:
    """minify's options naming a repro: without them a folder with no capture is refused before minify/ is
    touched (tests/test_received_folders_and_total_parsers.py), so the folder's own guards are reached only with them."""
    (tmp_path / "repro.py").write_text("print('ok')\n")
    return ("--script", str(tmp_path / "repro.py"))


def untouched(folder) -> bool:
    return all((folder / n).read_text() == "mine\n"
               for n in ("repro.py", "minify.json", "graph.json", "values.pt", "candidates/keep.txt"))


def test_minify_never_deletes_or_writes_through_a_linked_minify_folder(tmp_path):
    run, mine = run_folder(tmp_path), victim(tmp_path)
    (run / "minify").symlink_to(mine)
    proc = cli("minify", str(run), *named_repro(tmp_path))
    assert proc.returncode == 2 and one_line(proc) and "minify" in proc.stderr, proc.stderr
    assert untouched(mine)


@pytest.mark.parametrize("name", ["runs", "cache"])
def test_minify_never_captures_or_caches_into_a_linked_folder(tmp_path, name):
    run, mine = run_folder(tmp_path), victim(tmp_path)
    (run / "minify").mkdir()
    (run / "minify" / name).symlink_to(mine)
    proc = cli("minify", str(run), *named_repro(tmp_path), "-q")
    assert proc.returncode == 2 and one_line(proc) and name in proc.stderr, proc.stderr
    assert sorted(os.listdir(mine)) == ["candidates", "graph.json", "minify.json", "repro.py", "values.pt"]


@pytest.mark.parametrize("name", ["candidates", "repro.py", "graph.json", "values.pt", "minify.json"])
def test_a_link_planted_inside_the_minify_folder_is_removed_not_followed(tmp_path, name):
    run, mine = run_folder(tmp_path), victim(tmp_path)
    (run / "minify").mkdir()
    (run / "minify" / name).symlink_to(mine / name)
    RunFolder(str(run)).remove(f"minify/{name}")
    assert not os.path.lexists(run / "minify" / name) and untouched(mine)


def test_the_eager_walk_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    import torch

    from aoti_bisect.minify import extract_child

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    mine = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    torch.export.save(torch.export.export(M(), (torch.rand(3),)), str(out / "program.pt2"))
    torch.save({"call": 0, "args": [torch.rand(3)], "kwargs": {}}, str(out / "inputs.pt"))
    for name in ("graph.json", "values.pt"):
        (out / name).symlink_to(mine / name)
    extract_child.main(str(out / "program.pt2"), str(out / "inputs.pt"), str(out))
    assert untouched(mine)
    assert not (out / "graph.json").is_symlink() and json.loads((out / "graph.json").read_text())["nodes"]


def test_the_crash_handler_never_writes_its_traceback_through_a_link(tmp_path, capsys):
    mine = victim(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "crash-traceback.txt").symlink_to(mine / "repro.py")
    report_crash(RuntimeError("boom"), str(run))
    assert untouched(mine)
    assert "RuntimeError: boom" in (run / "crash-traceback.txt").read_text()
    assert not (run / "crash-traceback.txt").is_symlink()


def test_report_and_minify_never_read_a_report_json_through_a_link(tmp_path):
    elsewhere = run_folder(tmp_path)
    run = tmp_path / "linked"
    run.mkdir()
    (run / "report.json").symlink_to(elsewhere / "report.json")
    for args in (("report", str(run)), ("minify", str(run))):
        proc = cli(*args)
        assert proc.returncode == 2 and one_line(proc) and "link" in proc.stderr, proc.stderr


def test_a_capture_behind_a_link_is_not_read(tmp_path):
    from aoti_bisect.minify import _find_capture

    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("program.pt2", "inputs.pt"):
        (outside / name).write_text("")
    run = run_folder(tmp_path)
    (run / "runs" / "baseline-000").mkdir(parents=True)
    (run / "runs" / "baseline-000" / "capture").symlink_to(outside)
    (run / "runs" / "sanity-001" / "capture").mkdir(parents=True)
    (run / "runs" / "sanity-001" / "capture" / "program.pt2").symlink_to(outside / "program.pt2")
    (run / "runs" / "sanity-001" / "capture" / "inputs.pt").write_text("")
    assert _find_capture(RunFolder(str(run)), "nan_inf") is None


# --- 3. No code runs from a run folder ------------------------------------------------------------------------

class _Planted:
    """What a hostile inputs.pt holds: unpickling it calls open(), creating the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


def test_captured_inputs_that_would_run_code_are_refused_in_one_line(tmp_path, capsys):
    import torch

    from aoti_bisect.minify import extract_child

    class M(torch.nn.Module):
        def forward(self, x):
            return x * 2

    marker = tmp_path / "code-ran"
    torch.export.save(torch.export.export(M(), (torch.rand(2),)), str(tmp_path / "program.pt2"))
    torch.save({"call": 0, "args": [_Planted(str(marker))], "kwargs": {}}, str(tmp_path / "inputs.pt"))
    with pytest.raises(SystemExit) as stop:
        extract_child.main(str(tmp_path / "program.pt2"), str(tmp_path / "inputs.pt"), str(tmp_path))
    assert stop.value.code == 3 and not marker.exists()
    assert "aoti-bisect minify: the captured inputs hold objects" in capsys.readouterr().err


def test_every_tensor_load_of_minify_is_weights_only():
    import aoti_bisect.minify as package

    folder = os.path.dirname(package.__file__)
    for name in os.listdir(folder):
        if name.endswith(".py"):
            source = open(os.path.join(folder, name)).read()
            loads = re.findall(r"torch\.load\([^\n]*", source)
            assert all("weights_only=True" in call for call in loads), (name, loads)


# --- 4. Unvalidated reading: one line and exit 2, never 255 ---------------------------------------------------

def _nested(depth):
    value = "leaf"
    for _ in range(depth):
        value = [value]
    return value


BAD_REPORTS = {
    "truncated": lambda: json.dumps(json.load(open(DATA)))[:500].encode(),
    "not utf-8": lambda: b'{"schema_version": 1, "verdict": "reproduced\xff\xfe"}',
    "a list": lambda: b"[1, 2, 3]",
    "wrong-typed command": lambda: json.dumps({**json.load(open(DATA)), "command": [1, None]}).encode(),
    "wrong-typed origin nodes": lambda: json.dumps(_with_origin_nodes(7)).encode(),
    "deeply nested": lambda: json.dumps({**json.load(open(DATA)), "environment": {"x": _nested(900)}}).encode(),
    "nested past the parser": lambda: b"[" * 100_000,
    "future schema": lambda: json.dumps({**json.load(open(DATA)), "schema_version": 99}).encode(),
}


def _with_origin_nodes(nodes):
    data = json.load(open(DATA))
    data["culprit"]["origin"] = {"nodes": nodes, "lines": [{"line": 1, "path": "m.py"}]}
    return data


@pytest.mark.parametrize("case", sorted(BAD_REPORTS))
@pytest.mark.parametrize("command", ["minify", "report"])
def test_a_bad_report_json_is_one_line_and_exit_2(tmp_path, case, command):
    run = tmp_path / "run"
    run.mkdir()
    (run / "report.json").write_bytes(BAD_REPORTS[case]())
    proc = cli(command, str(run))
    assert proc.returncode == 2 and one_line(proc), proc.stderr


@pytest.mark.parametrize("planted", ["file", "dangling link"])
def test_a_file_or_link_where_the_minify_folder_goes_is_one_line_and_exit_2(tmp_path, planted):
    run = run_folder(tmp_path)
    if planted == "file":
        (run / "minify").write_text("not a folder\n")
    else:
        (run / "minify").symlink_to(tmp_path / "nowhere")
    proc = cli("minify", str(run), *named_repro(tmp_path))
    assert proc.returncode == 2 and one_line(proc), proc.stderr
    assert not (tmp_path / "nowhere").exists()


# --- 5. Secrets ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("secret", [VAULT_TOKEN, "hvb." + "A1b2C3d4E5" * 15, AGE_KEY])
def test_vault_tokens_and_age_keys_are_masked(secret):
    assert secret not in Redactor()(f"export VAULT={secret}; run with {secret}.")


def test_bundle_member_names_are_redacted_as_contents_are(tmp_path):
    from aoti_bisect.report.bundle import write_bundle

    run = tmp_path / f"run-{GH_TOKEN}"
    run.mkdir()
    data = json.load(open(DATA))
    data["stages"] = data["stages"][:1]
    data["stages"][0]["logs"] = [str(run / "runs" / f"baseline-{GH_TOKEN}" / "output.log")]
    (run / "runs" / f"baseline-{GH_TOKEN}").mkdir(parents=True)
    (run / "runs" / f"baseline-{GH_TOKEN}" / "output.log").write_text("failed\n")
    (run / "report.json").write_text(json.dumps(data))
    dest = tmp_path / "b.tar.gz"
    write_bundle(str(run), str(dest), ReportRecord.from_json(data), Redactor())
    with tarfile.open(dest) as tar:
        names = tar.getnames()
        left_out = tar.extractfile(next(n for n in names if n.endswith("LEFT_OUT.txt"))).read().decode()
    assert names and not [n for n in names if GH_TOKEN in n]
    assert GH_TOKEN not in left_out


def _bundle_run(tmp_path, hook_json: str):
    """A run folder whose one stage's run holds output.log and a hook.json, with the run's redaction record."""
    from aoti_bisect.report.bundle import record_secret_spans

    run = tmp_path / "run"
    folder = run / "runs" / "baseline-000"
    folder.mkdir(parents=True)
    (folder / "output.log").write_text("failed\n")
    (folder / "hook.json").write_text(hook_json)
    data = json.load(open(DATA))
    data["stages"] = data["stages"][:1]
    data["stages"][0]["logs"] = [str(folder / "output.log")]
    (run / "report.json").write_text(json.dumps(data))
    record_secret_spans(str(run), ReportRecord.from_json(data), Redactor())
    return run, ReportRecord.from_json(data)


@pytest.mark.parametrize("record", [
    {"version": 1, "files": {"runs/baseline-000/output.log": "not an entry"}},
    {"version": 1, "files": {"runs/baseline-000/output.log": {"sha256": None, "spans": "x"}}},
    {"version": 1, "files": []},
    [1, 2],
])
def test_a_bundle_from_a_malformed_redaction_record_leaves_files_out_without_a_crash(tmp_path, record):
    from aoti_bisect.report.bundle import RECORD, write_bundle

    run, report = _bundle_run(tmp_path, "{}")
    (run / RECORD).write_text(json.dumps(record))
    left_out = write_bundle(str(run), str(tmp_path / "b.tar.gz"), report, Redactor())
    assert "runs/baseline-000/output.log" in left_out


def test_a_bundle_of_a_hook_record_nested_past_the_redactor_redacts_it_as_text(tmp_path):
    from aoti_bisect.report.bundle import write_bundle

    run, report = _bundle_run(tmp_path, f'{{"token": "{GH_TOKEN}", "x": ' + "[" * 5000 + "]" * 5000 + "}")
    assert write_bundle(str(run), str(tmp_path / "b.tar.gz"), report, Redactor()) == []
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        hook = tar.extractfile(next(n for n in tar.getnames() if n.endswith("hook.json"))).read().decode()
    assert GH_TOKEN not in hook and MASK in hook


# detect-secrets' own detectors over a corpus of the formats they know: a format its maintainers add, or one we
# stop masking, fails here. Samples are made up (none is a real credential).
DETECT_SECRETS_CORPUS = {
    "ArtifactoryDetector": "artifactory token AKCp8" + "kRt5Yu2Wq9Zx3Vb7Nm1Lk4Jh6Gf8Ds0Aa2Ss4Dd6Ff8Gg0Hh2Jj4Kk6"
                           + "Ll8Zz0Xx2Cc4Vv6",
    "AWSKeyDetector": "using key AKIA" + "Q7V3KR9PZ2MW8NT4" + " for s3",
    "AzureStorageKeyDetector": "DefaultEndpointsProtocol=https;AccountName=x;AccountKey="
                               + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4m" * 2 + "N5oP8qR2sT4uV6wX8yZ0ab==",
    "BasicAuthDetector": "fetching https://admin:" + "Qw9rTy2Ui7Op" + "@example.com/data",
    "DiscordBotTokenDetector": "bot token M" + "Tk4NzY1NDMyMTAxMjM0NTY3" + ".Gh7Kq2." + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0k",
    "GitHubTokenDetector": "remote uses " + GH_TOKEN,
    "GitLabTokenDetector": "gitlab glpat-" + "Zq8RtY2uV5wX7yA1bC3d",
    "JwtTokenDetector": "auth eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4g"
                        "RG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "MailchimpDetector": "mailchimp " + "3f2a9c81d4e6b7051a2c3d4e5f6a7b8c" + "-us12",
    "NpmDetector": "//registry.npmjs.org/:_authToken=npm_" + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN5oP",
    "OpenAIDetector": "OPENAI sk-" + "Zq8RtY2uV5wX7yA1bC3d" + "T3BlbkFJ" + "eF6gH9jK0lM4nO5pQ8rS",
    "PrivateKeyDetector": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx" + "Q7v3kR9pZ2mW8nT4bY6cU1dE5fG0"
                          + "\n-----END RSA PRIVATE KEY-----",
    "PypiTokenDetector": "pypi-AgEIcHlwaS5vcmc" + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN5oP" * 2,
    "SendGridDetector": "SG." + "Zq8RtY2uV5wX7yA1bC3dE6" + "." + "fG9hJ0kL4mN5oP8qR2sT4uV6wX8yZ0aB1cD3eF5gH7j",
    "SlackDetector": "slack xoxb-" + "4815162342" + "-" + "Zq8RtY2uV5wX7yA1bC3dE6fG",
    "SquareOAuthDetector": "square sq0csp-" + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN5oP8qR2sT4",
    "StripeDetector": "stripe sk_live_" + "Zq8RtY2uV5wX7yA1bC3dE6fG",
    "TelegramBotTokenDetector": "telegram " + "123456789" + ":AA" + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN",
    "TwilioKeyDetector": "twilio SK" + "3f2a9c81d4e6b7051a2c3d4e5f6a7b8c",
    "Base64HighEntropyString": 'api = "' + "Zq8RtY2uV5wX7yA1bC3dE6fG9hJ0kL4mN5oP" + '"',
    "KeywordDetector": 'password = "' + "Qw9rTy2Ui7Op" + '"',
}
# Detectors whose secrets are left to other rules, on purpose: IBM, SoftLayer and Cloudant keys are found by the
# scanner only by verifying them against the live service (their names are secret-named assignments here); a
# public IP address is no secret; a hex string is a hash (a package's sha256, a commit) far more often than a key.
NOT_COVERED = {"CloudantDetector", "IbmCloudIamDetector", "IbmCosHmacDetector", "SoftlayerDetector",
               "IPPublicDetector", "HexHighEntropyString"}


def test_our_redactor_masks_every_secret_detect_secrets_finds_in_its_formats():
    pytest.importorskip("detect_secrets")
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    detectors = {cls.__name__: cls for cls in get_mapping_from_secret_type_to_class().values()}
    assert set(detectors) - NOT_COVERED - set(DETECT_SECRETS_CORPUS) == set(), "a detector with no sample"
    redact = Redactor()
    for name, text in DETECT_SECRETS_CORPUS.items():
        found = {s.secret_value for line in text.splitlines()
                 for s in detectors[name]().analyze_line(filename="output.log", line=line, line_number=1)}
        assert found, f"{name} does not recognise its sample: the corpus is out of date"
        shown = redact(text)
        assert [s for s in found if s and s in shown] == [], name


# --- 6. Small faults --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", ["nan", "inf", "-1"])
def test_a_budget_that_is_no_finite_number_of_seconds_is_exit_2(tmp_path, budget):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    proc = cli(str(tmp_path / "ok.py"), "--budget", budget, "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and one_line(proc) and "--budget" in proc.stderr, proc.stderr
    assert not (tmp_path / "run").exists()


def test_minify_of_a_relative_run_dir_with_a_capture_walks_it_inside_the_run_folder(tmp_path, monkeypatch):
    """The capture is found and walked from a relative RUN_DIR, and the walk's temporary files and Inductor
    cache stay inside the run folder."""
    import torch

    from aoti_bisect import minify as package
    from aoti_bisect.minify.search import Trials

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.log(x - 0.5) * 2

    run = run_folder(tmp_path)
    capture = run / "runs" / "baseline-000" / "capture"
    capture.mkdir(parents=True)
    torch.export.save(torch.export.export(M(), (torch.rand(4),)), str(capture / "program.pt2"))
    torch.save({"call": 0, "args": [torch.rand(4)], "kwargs": {}}, str(capture / "inputs.pt"))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(Trials, "first_failing", lambda self, candidates: None)  # no AOTI compile here
    monkeypatch.chdir(tmp_path)
    result = package.minify("run", package.MinifyOptions(), lambda line: None)
    assert result.status is package.Status.NOT_REPRODUCED, result.message
    assert (run / "minify" / "graph.json").is_file()
    assert os.listdir(tmp) == []


def test_a_walk_killed_by_the_timeout_is_said_to_be_one_not_a_load_failure(tmp_path, monkeypatch):
    from aoti_bisect import minify as package
    from aoti_bisect.run import process
    from aoti_bisect.run.types import ProcessExit

    def killed(argv, env, cwd, log, timeout):
        open(log, "w").write("walking...\n")
        return ProcessExit(None, None, True, timeout, 11)

    monkeypatch.setattr(process, "execute", killed)
    problem = package._extract(sys.executable, str(tmp_path / "capture"), str(tmp_path),
                               package.MinifyOptions(timeout_s=5), lambda line: None)
    assert "ran past --timeout (5 s)" in problem and "cannot load" not in problem


def test_ctrl_c_while_the_command_line_loads_is_130_and_one_line():
    # SIGINT the moment the CLI imports click: the imports are most of the start-up.
    # A shell's background job inherits SIGINT ignored, and Python keeps it so: Ctrl-C's handler, as a terminal has it.
    code = ("import builtins, os, signal, sys\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "real = builtins.__import__\n"
            "def hooked(name, *a, **k):\n"
            "    if name == 'click':\n"
            "        builtins.__import__ = real\n"
            "        os.kill(os.getpid(), signal.SIGINT)\n"
            "    return real(name, *a, **k)\n"
            "builtins.__import__ = hooked\n"
            "sys.argv = ['aoti-bisect', '--version']\n"
            "from aoti_bisect.cli import entry\n"
            "entry()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and one_line(proc) and "interrupted" in proc.stderr, proc.stderr


def test_ctrl_c_while_the_command_line_is_parsed_is_130_and_one_line():
    code = ("import sys\nimport aoti_bisect.cli as c\n"
            "def interrupted(*a, **k): raise KeyboardInterrupt\n"
            "c.main.main = interrupted\n"
            "c.entry()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 130 and one_line(proc) and "interrupted" in proc.stderr, proc.stderr


# --- 7. Property tests: hostile text through the writer, hostile JSON through the reader -------------------------

MARKUP = "@#GH-[]()!*_~`<>&;|\\$:/= \t\nabz019\u202a\u202e\u2066\u2069\u200b\u200d\u2060\ufeff\x1b\x00\x85"
hostile_text = st.text(st.sampled_from(MARKUP) | st.characters(), max_size=60)


@settings(max_examples=300, deadline=None)
@given(hostile_text)
def test_md_cell_never_emits_live_markup(text):
    assert live_markup("x: " + md_cell(text)) == []


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner,
                                                                                       max_size=4),
                           max_leaves=20)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_the_run_folder_reader_returns_an_object_or_one_line(tmp_path, blob):
    (tmp_path / "f.json").write_bytes(blob)
    try:
        data = RunFolder(str(tmp_path)).read_json("f.json")
    except RunFolderError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(data, dict)


names = st.lists(st.sampled_from(["a", "b", "..", ".", "", "report.json", "\0", "é", "\u202e", "x" * 300]),
                 min_size=1, max_size=4).map("/".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rel=names | st.text(max_size=30), planted=st.sampled_from(["file", "folder", "link out", "link in", "fifo"]))
def test_the_run_folder_reader_takes_any_name_and_returns_an_object_or_one_line(tmp_path, rel, planted):
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    (run / "a").mkdir(parents=True)
    (tmp_path / "outside.json").write_text("{}")
    target = run / "a" / "b"
    {"file": lambda: target.write_text("{}"), "folder": target.mkdir,
     "link out": lambda: target.symlink_to(tmp_path / "outside.json"),
     "link in": lambda: (run / "a" / "real.json").write_text("{}") or target.symlink_to(run / "a" / "real.json"),
     "fifo": lambda: os.mkfifo(target)}[planted]()
    try:
        data = RunFolder(str(run)).read_json(rel)
    except (RunFolderError, OSError) as exc:
        assert "\n" not in str(exc)
    else:
        assert data == {} and planted == "file"


def _paths(value, prefix=()):
    """Every path into a JSON value (keys and indexes), the value itself first."""
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, sub in items:
        yield from _paths(sub, prefix + (key,))


REPORT = json.load(open(DATA))
REPORT_PATHS = [p for p in _paths(REPORT) if p]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(REPORT_PATHS), value=json_values)
def test_a_report_with_any_field_replaced_loads_and_renders_or_is_one_line(tmp_path, where, value):
    data = json.loads(json.dumps(REPORT))
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir()
    (run / "report.json").write_text(json.dumps(data))
    try:
        report = Report.load(str(run))
    except UsageFailure as exc:
        assert "\n" not in str(exc)
        return
    shown = Redactor().data(report.data)
    render_markdown(shown)
    report.headline()


def test_the_reader_refuses_what_nests_past_its_limit(tmp_path):
    (tmp_path / "deep.json").write_text(json.dumps({"x": _nested(MAX_JSON_DEPTH + 1)}))
    with pytest.raises(RunFolderError, match="nested"):
        RunFolder(str(tmp_path)).read_json("deep.json")
