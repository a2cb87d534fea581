"""A received run folder is data, never code (issue #51); every parser total; paths are paths;
Markdown and secrets by rule. Each class is proved where a user meets it: the `aoti-bisect` CLI in a real
process on a hostile or received folder, and property tests (hypothesis) over every parser of child output."""
import html
import json
import os
import random
import re
import string
import subprocess
import sys
import tarfile
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

DATA = os.path.join(os.path.dirname(__file__), "data", "report-nan_after_matmul.json")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args, cwd=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, "PYTHONPATH": REPO})


def one_line(proc) -> bool:
    return "Traceback" not in proc.stderr and proc.stderr.count("\n") <= 1


def run_folder(path, edit=None):
    """A finished run's folder: the captured report.json of a real run (a reproduced nan_inf)."""
    path.mkdir(parents=True)
    data = json.load(open(DATA))
    if edit:
        edit(data)
    (path / "report.json").write_text(json.dumps(data))
    return path


# --- 1. A received run folder is data, never code ----------------------------------------------------------------

def hostile_command(data):
    data["command"] = ["/bin/sh", "-c", "touch PWNED; touch \"$HOME/PWNED\""]


def test_a_received_bundle_whose_report_names_a_command_runs_nothing_when_minified(tmp_path):
    sender = run_folder(tmp_path / "sender", hostile_command)
    (sender / "runs" / "baseline-000").mkdir(parents=True)
    (sender / "runs" / "baseline-000" / "output.log").write_text("RuntimeError: non-finite output\n")
    made = cli("report", str(sender), "--bundle", str(tmp_path / "b.tar.gz"))
    assert made.returncode == 0, made.stderr
    received = tmp_path / "received"
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        tar.extractall(received, filter="data")
    [folder] = [p for p in received.rglob("report.json")]
    assert json.loads(folder.read_text())["command"][0] == "/bin/sh"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    before = sorted(p.name for p in folder.parent.rglob("*"))
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "minify", str(folder.parent)], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env={**os.environ, "PYTHONPATH": REPO, "HOME": str(home)})
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert "--script" in proc.stderr and "runs no command read from a run folder" in proc.stderr
    assert not list(tmp_path.rglob("PWNED")) and os.listdir(cwd) == [] and os.listdir(home) == []
    assert sorted(p.name for p in folder.parent.rglob("*")) == before  # refused before anything was written


def test_minify_runs_the_repro_the_user_names_never_the_reports(tmp_path):
    folder = run_folder(tmp_path / "run", hostile_command)
    named = tmp_path / "named.py"
    named.write_text(f"open({str(tmp_path / 'NAMED-RAN')!r}, 'w').close()\n")
    proc = cli("minify", str(folder), "--script", str(named), "-q", cwd=tmp_path)
    # The named script ran (hooked, with capture on) and compiled nothing: no program to cut, 125.
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert (tmp_path / "NAMED-RAN").exists() and not list(tmp_path.rglob("PWNED"))
    assert "compiled no program" in proc.stderr


def test_custom_op_code_in_a_capture_runs_only_for_a_named_repro(tmp_path):
    folder = run_folder(tmp_path / "run")
    capture = folder / "runs" / "fakecheck-004" / "capture"
    (capture / "libs").mkdir(parents=True)
    for name in ("program.pt2", "inputs.pt"):
        (capture / name).write_bytes(b"")
    (capture / "libs" / "libevil.so").write_bytes(b"\x7fELF")
    proc = cli("minify", str(folder), "-q")
    assert proc.returncode == 125 and one_line(proc), proc.stderr
    assert "custom ops whose code is in the run folder" in proc.stderr and "libs" in proc.stderr


# --- 2. Every parser total ------------------------------------------------------------------------------------------

BIG = "9" * 5000  # int() refuses more than 4300 digits


def _parsers():
    """(name, function of one text) for every parser of a child's output or of a file a child wrote."""
    from aoti_bisect.aoti import (
        checks,
        cudacore,
        eagerwalk,
        fakecheck,
        hook_record,
        package,
        printer,
        provenance,
        sanitizer,
        wrapper,
    )
    from aoti_bisect.files.own import loads_child_json
    from aoti_bisect.run import classify, witness
    from aoti_bisect.run.types import ProcessExit

    def json_or_text(parse):
        def run(text):
            try:
                data = loads_child_json(text)
            except ValueError:  # the typed "unreadable" of child JSON
                data = text
            return parse(data)
        return run

    def lines(text):
        return list(printer.collect(printer.parse_blocks(text.splitlines(keepends=True)), 4))

    return [
        ("classify", lambda t: classify.classify(t, ProcessExit(1, None, False, 1.0, 1))),
        ("classify.signal", lambda t: classify.classify(t, ProcessExit(None, 11, False, 1.0, 1))),
        ("parse_frames", classify.parse_frames), ("final_exception", classify.final_exception),
        ("triton_assert", classify.triton_assert), ("kernel_throw", classify.kernel_throw),
        ("kernel_named", classify.kernel_named), ("collapse_repeats", lambda t: classify.collapse_repeats(t.split("\n"))),
        ("witness.parse", witness.parse), ("thrown_site", witness.thrown_site),
        ("python_op_frame", witness.python_op_frame), ("parse_addr2line", witness.parse_addr2line),
        ("assert_site", lambda t: witness.assert_site("triton_poi_fused_0", t)),
        ("cudacore", cudacore.parse), ("sanity_hit", checks.sanity_hit), ("index_bound", checks.index_bound),
        ("dim_rejected", checks.dim_rejected), ("compute-sanitizer", lambda t: sanitizer.parse_compute_sanitizer(t)),
        ("valgrind", lambda t: sanitizer.parse_valgrind(t)),
        ("parse_trace", lambda t: printer.parse_trace(t.splitlines())), ("level2 blocks", lines),
        ("user_line", provenance.user_line), ("kernel_information", provenance.parse_kernel_information),
        ("source_nodes", provenance.source_nodes), ("parse_program", json_or_text(provenance.parse_program)),
        ("parse_wrapper", wrapper.parse_wrapper), ("split_args", wrapper.split_args),
        ("triton_kernel_name", wrapper.triton_kernel_name), ("extern_ops", package.extern_ops),
        ("eagerwalk", eagerwalk.parse), ("fakecheck", fakecheck.parse), ("differences", fakecheck.differences),
        ("capture_problem", fakecheck.capture_problem), ("hook.json", hook_record.parse),
        ("constants", json_or_text(__import__("aoti_bisect.aoti.constants", fromlist=["x"]).parse_values)),
    ]


PARSERS = _parsers()

# Pieces of the lines these parsers look for, so that random text reaches their number and field conversions. No
# raw lone surrogate: every read of a child's text decodes with errors replaced (files/own.read_log, read_run_file), and
# JSON's escape of one is replaced at the boundary (files/own.no_surrogates, tested below).
PIECES = ['  File "/a/b.py", line ', ", in f\n", "/t/k.py:", ": kernel: block: [", "], thread: [", "0,0,", BIG,
          "Assertion `x < ", "` failed.\n", "aoti-bisect-crash pid=", " signal=", " addr=0x1\n", "frame 0x1 0x2 /a.so f\n",
          "========= Invalid __global__ read of size ", " bytes\n", "========= ERROR SUMMARY: ", " errors\n",
          "==1== Invalid read of size ", "==1== ERROR SUMMARY: ", " errors from 1 contexts\n",
          "The exception was triggered at PC 0x1 (a.cu:", ")\n", "CUDA Exception: Warp Illegal Address\n",
          "index ", " is out of bounds for dimension ", " with size ", "{", "}", "[", "]", '"', ":", ",", "\n",
          '"nodes": ', '"size": ', '"shape": ', "1e999", "-", "NaN", "\\ud800", "\x00", "\u202e",
          "[AOTI_TORCH_CHECK] ", "input_handles[", "]: unmatched dim value at ", ", expected: ", "cpp_fused_x_0",
          "triton_poi_fused_0", "Exception raised from cpp_fused_x_0 at /a.cpp:", " (most recent call first):\n"]
hostile_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=20)), max_size=40).map("".join)


@pytest.mark.parametrize("name, parse", PARSERS, ids=[n for n, _ in PARSERS])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text)
def test_every_parser_of_child_output_returns_a_value_for_any_text(name, parse, text):
    parse(text)


@pytest.mark.parametrize("name, parse", PARSERS, ids=[n for n, _ in PARSERS])
def test_numbers_past_4300_digits_are_no_exception(name, parse):
    for piece in PIECES:
        if piece != BIG:
            parse(piece + BIG + piece + BIG + "\n")
    parse("".join(PIECES))


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=4), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(raw=st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode()),
                     st.integers(60, 3000).map(lambda n: b"[" * n + b"]" * n)))
def test_child_json_and_run_folder_json_are_a_value_or_their_typed_unreadable(tmp_path_factory, raw):
    from aoti_bisect.files.own import loads_child_json
    from aoti_bisect.files.runfolder import RunFolder, RunFolderError

    try:
        loads_child_json(raw.decode("utf-8", "replace"))
    except ValueError:
        pass
    folder = tmp_path_factory.mktemp("rf")
    (folder / "x.json").write_bytes(raw)
    try:
        data = RunFolder(str(folder)).read_json("x.json")
    except RunFolderError:
        return
    json.dumps(data).encode("utf-8")  # no lone surrogate survives the boundary


def test_a_lone_surrogate_in_report_json_renders_as_a_replacement_character(tmp_path):
    run = run_folder(tmp_path / "run")
    text = (run / "report.json").read_text()
    data = json.loads(text)
    data["signature"]["message"] = "bad \ud800 value"
    (run / "report.json").write_text(json.dumps(data))  # ensure_ascii: the escape \ud800, as a child can write it
    for fmt in ("md", "text", "json"):
        proc = cli("report", str(run), "--format", fmt)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr and proc.stderr == "", proc.stderr
    assert "bad \ufffd value" in cli("report", str(run), "--format", "md").stdout


def test_a_lone_surrogate_in_a_shard_record_merges(tmp_path):
    from nightly_helpers import nightly, seeded_set, tool

    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 1)})
    assert nightly(tmp_path, set_path, "night", "--runs", "1", "--shard", "0/1").returncode == 0
    path = tmp_path / "night" / "records" / "shard-0-of-1.jsonl"
    lines = path.read_text().splitlines()
    lines = [line.replace('"a"', '"a\\ud800"', 1) if '"repro"' in line else line for line in lines]
    path.write_text("\n".join(lines) + "\n")
    proc = tool(tmp_path, "merge", str(path), "--out", "m", "--db", "h.sqlite3")
    assert proc.returncode in (0, 1, 3) and "Traceback" not in proc.stderr, proc.stderr
    assert "a\ufffd" in (tmp_path / "m" / "summary.md").read_text()


@pytest.mark.parametrize("entry", ['script = 5', 'script = ["a.py"]', 'script = {x = 1}', 'args = "x"',
                                   'args = [{a = 1}]'])
def test_a_manifest_field_of_the_wrong_type_is_one_line_and_exit_2(tmp_path, entry):
    (tmp_path / "r.py").write_text("print('ok')\n")
    fields = {"name": '"r"', "script": '"r.py"'}
    key, value = entry.split(" = ", 1)
    fields[key] = value
    (tmp_path / "m.toml").write_text("[[repro]]\n" + "".join(f"{k} = {v}\n" for k, v in fields.items()))
    proc = cli("nightly", str(tmp_path / "m.toml"), "--out", str(tmp_path / "n"), "--runs", "1", "--db",
               str(tmp_path / "h.sqlite3"))
    assert proc.returncode == 2 and one_line(proc) and key in proc.stderr, proc.stderr


def test_a_file_named_cudacore_without_cuda_gdb_is_no_crash(tmp_path):
    # The repro writes a file named like a device core dump into its run's folder, on a machine without cuda-gdb.
    script = tmp_path / "dumps.py"
    script.write_text("import os\nopen(os.path.join(os.getcwd(), '..', 'cudacore.1'), 'w').write('x')\n"
                      "raise SystemExit('the output differs')\n")
    env = {**os.environ, "PYTHONPATH": REPO, "PATH": "/usr/bin:/bin", "CUDA_HOME": str(tmp_path)}
    env.pop("CUDA_PATH", None)
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "--runs", "1", "--stages", "baseline",
                           "--budget", "0", "--out", str(tmp_path / "run")], capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    assert list((tmp_path / "run").rglob("cudacore.1")), "the repro did not write where the dumps go"


# --- 3. Paths are paths -----------------------------------------------------------------------------------------

PATTERN_NAME = "run [a]*?"  # each of these is a glob metacharacter; the folder's name matches no pattern of itself


def test_a_bundle_of_a_run_folder_whose_path_is_a_glob_pattern_takes_its_run_logs(tmp_path):
    run = run_folder(tmp_path / PATTERN_NAME)
    (run / "runs" / "baseline-000").mkdir(parents=True)
    (run / "runs" / "baseline-000" / "output.log").write_text("RuntimeError: non-finite output\n")
    proc = cli("report", str(run), "--bundle", str(tmp_path / "b.tar.gz"))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        left_out = tar.extractfile(f"{PATTERN_NAME}/LEFT_OUT.txt").read().decode()
    # Found: no redactions.json covers it (a hand-made folder), so it is named as left out; unfound, it was not.
    assert "runs/baseline-000/output.log" in left_out, left_out


def test_minify_finds_the_capture_of_a_run_folder_whose_path_is_a_glob_pattern(tmp_path):
    run = run_folder(tmp_path / PATTERN_NAME)
    capture = run / "runs" / "fakecheck-004" / "capture"
    (capture / "libs").mkdir(parents=True)
    for name in ("program.pt2", "inputs.pt"):
        (capture / name).write_bytes(b"")
    (capture / "libs" / "libop.so").write_bytes(b"\x7fELF")
    proc = cli("minify", str(run), "-q")
    # Found: refused for its custom-op code (without it, "holds no captured program")
    assert proc.returncode == 125 and "custom ops whose code is in the run folder" in proc.stderr, proc.stderr


def test_merge_finds_the_records_under_a_folder_whose_path_is_a_glob_pattern(tmp_path):
    from nightly_helpers import nightly, seeded_set, tool

    set_path = seeded_set(tmp_path / "set.toml", {"a": (0.5, 1)})
    night = tmp_path / PATTERN_NAME
    assert nightly(tmp_path, set_path, str(night), "--runs", "1", "--shard", "0/1").returncode == 0
    proc = tool(tmp_path, "merge", str(night), "--out", "m", "--db", "h.sqlite3")
    assert proc.returncode in (0, 1) and "holds no shard" not in proc.stderr, proc.stderr


def test_kernel_sources_are_found_under_a_root_whose_path_is_a_glob_pattern(tmp_path):
    from aoti_bisect.aoti.wrapper import find_wrappers, kernel_source

    root = tmp_path / PATTERN_NAME / "cache" / "ab"
    root.mkdir(parents=True)
    (root / "x.kernel.cpp").write_text("extern \"C\" void cpp_fused_x_0(float* a)\n{\n    a[0] = 1;\n}\n")
    (root / "y.wrapper.cpp").write_text("// wrapper\n")
    assert kernel_source("cpp_fused_x_0", [str(tmp_path / PATTERN_NAME)])[0] == str(root / "x.kernel.cpp")
    assert find_wrappers(str(tmp_path / PATTERN_NAME)) == [str(root / "y.wrapper.cpp")]


# --- 4. Markdown by rule --------------------------------------------------------------------------------------------

def test_hidden_characters_are_escaped_by_their_unicode_properties():
    import unicodedata

    from aoti_bisect.text import hidden, printable

    named = {"\u200e": "LRM", "\u200f": "RLM", "\u061c": "ALM", "\u00ad": "soft hyphen", "\U000e0041": "tag A",
             "\U000e007f": "cancel tag", "\u115f": "Hangul filler", "\u3164": "Hangul filler", "\ufe0f": "VS16",
             "\U000e0100": "VS17", "\u034f": "CGJ", "\u2028": "line separator", "\u2066": "LRI", "\u202e": "RLO",
             "\u200b": "ZWSP", "\ufeff": "BOM", "\x1b": "ESC", "\x9b": "CSI", "\r": "CR", "\u2065": "unassigned"}
    for char, name in named.items():
        assert printable(f"a{char}b") == f"a\\{'x' if ord(char) <= 0xff else 'u' if ord(char) <= 0xffff else 'U'}" \
            f"{ord(char):0{2 if ord(char) <= 0xff else 4 if ord(char) <= 0xffff else 8}x}b", name
    # Every format character, by category, in the whole code space; nothing visible is touched.
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) == "Cf":
            assert hidden(char) and char not in printable(char), hex(code)
    for text in ("cpp_fused_add_0 é 中文 ü →", "tab\tand\nnewline", "emoji 🙂 ok"):
        assert printable(text) == text


# GitHub's rendering, as near as a Python renderer gets: CommonMark with GFM tables and strikethrough, and
# linkify for the autolink extension. GitHub links no bare domain (example.com), so fuzzy links are off, and the
# `www.` autolinks that this leaves out of linkify are found by GFM_AUTOLINK in the text that renders as prose.
MD = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])
MD.linkify.set({"fuzzy_link": False})
# What the extension needs to make a link: `www.` or `scheme://` before a domain's first character, an address.
GFM_AUTOLINK = re.compile(r"(?i:www)\.[A-Za-z0-9_-]|[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9_.-]"
                          r"|[A-Za-z0-9.+_-]+@[A-Za-z0-9_-]+\.[A-Za-z0-9_-]")
MENTION = re.compile(r"(?<![A-Za-z0-9_])@[A-Za-z0-9]")
REFERENCE = re.compile(r"#\d|(?i:GH-)\d")


# Tags the layout writes around text; a <details>, <summary> or heading is counted instead (hostile text must not
# open or close one), and any other tag, an image or a link out of the run folder is hostile text made live.
LAYOUT_TAGS = {"p", "ul", "ol", "li", "strong", "em", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "a",
               "br", "hr", "blockquote"}


def live(markdown: str) -> Counter:
    """What rendered Markdown holds beyond its layout: a link out of the run folder (the tool links only its own
    files, by relative path), an image, a tag, each <details>, <summary> and heading, a mention, a reference, an
    autolink GitHub would make in prose, a hidden character. A hostile render is compared with a plain one."""
    from aoti_bisect.text import hidden

    rendered = MD.render(markdown)
    prose = html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<code\b[^>]*>.*?</code>", "", rendered, flags=re.S)))
    hrefs = re.findall(r'<a href="([^"]*)"', rendered)
    found = ([f"href {h}" for h in hrefs if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|//", h)]
             + [f"<{t}" for t in re.findall(r"</?([a-z][a-z0-9]*)", rendered) if t not in LAYOUT_TAGS]
             + MENTION.findall(prose) + REFERENCE.findall(prose) + GFM_AUTOLINK.findall(prose)
             + [repr(c) for c in markdown if hidden(c) and c not in "\t\n"])  # kept in fences
    return Counter(found)


HOSTILE = ["https://evil.example/x", "https://github.com/other/repo/issues/1", "www.evil.com", "WWW.evil.com",
           "a.b@evil.co", "mailto:a@b.co", "xmpp:a@b.co", "ftp://x.y/z", "@octocat", "@org/team", "#12",
           "pytorch/pytorch#7", "GH-5", "<details>", "</details>", "<summary>x</summary>", "<img src=x onerror=y>",
           "<!--", "-->", "[x](https://y.z)", "![i](https://y.z/p.png)", "[x]: https://y.z", "*", "**", "_", "__",
           "~~", "|", "`", "```", "$", "\\", "&lt;b&gt;", "&#64;x", "\u202e", "\u200e", "\u00ad", "\U000e0041",
           "\u2028", "\u115f", "\x1b[2J", "\r", "\n", "\n\n", "# ", "- ", "1. ", "> ", "---", "===", "<", ">",
           "(", ")", "[", "]", ":"]
hostile_words = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=6)), min_size=1, max_size=12).map(
    lambda parts: "".join(parts))


def _report_with(text: str) -> dict:
    data = json.load(open(DATA))
    data["summary"] = f"{data['summary']} {text}"
    data["signature"]["message"] = text
    data["stages"][0]["finding"] = text
    data["stages"][0]["excerpt"]["key_lines"] = [text]
    data["culprit"]["kernel"] = text
    data["culprit"]["summary"] = text
    data["culprit"]["evidence"] = [text, f"{text} {text}"]
    data["culprit"]["stats"][0]["arg"] = text
    data["next_steps"] = [text] + data["next_steps"]
    data["environment"]["torch"] = text
    data["environment"]["cxx_version"] = text
    return data


def _render(text: str) -> str:
    from aoti_bisect.report.markdown import render_markdown
    from aoti_bisect.report.record import Minified, ReportRecord

    minified = Minified.from_json({"status": "verified", "message": text, "repro": "/r/minify/repro.py",
                                   "nodes_before": 9, "nodes_after": 2, "ops_after": [text, "log"],
                                   "lines_before": 30, "lines_after": 9, "candidates": 3, "seconds": 4.0,
                                   "verified": True})
    return render_markdown(ReportRecord.from_json(_report_with(text)), minified)


@settings(max_examples=80, deadline=None)
@given(text=hostile_words)
def test_a_report_of_hostile_text_has_no_link_mention_image_or_tag_the_tool_did_not_write(text):
    assert live(_render(text)) - live(_render("plain words")) == Counter()


@settings(max_examples=300, deadline=None)
@given(text=hostile_words)
def test_md_cell_of_hostile_text_is_inert_in_prose_and_in_a_table(text):
    from aoti_bisect.text import md_cell

    cell = md_cell(text)
    assert "\n" not in cell
    assert live(f"x: {cell}") == Counter()
    table = f"| a | b |\n|---|---|\n| {cell} | z |\n"
    assert live(table) == Counter()
    assert MD.render(table).count("<td") == 2  # the cell stayed one cell


def test_the_minified_section_holds_no_raw_markup(tmp_path):
    run = run_folder(tmp_path / "run")
    (run / "minify").mkdir()
    (run / "minify" / "minify.json").write_text(json.dumps({
        "status": "verified", "message": "</details> <details><summary>x</summary> ## Next steps https://e.x/y",
        "nodes_before": 9, "nodes_after": 2, "ops_after": ["</details>", "<b>"], "repro": "/a/</details>/repro.py",
        "verified": True}))
    proc = cli("report", str(run), "--format", "md")
    assert proc.returncode == 1, proc.stderr
    section = proc.stdout[proc.stdout.index("## Minified repro"):]
    section = section[:section.index("\n<details>")] if "\n<details>" in section else section
    assert "</details>" not in section.replace("`/a/</details>/`", "")
    assert live(section) == Counter({"<h2": 2}), section  # its heading, opened and closed


# --- 5. Secrets by rule -------------------------------------------------------------------------------------------

def made_up(prefix: str, n: int, alphabet: str = string.ascii_letters + string.digits, seed: int = 51) -> str:
    """A credential-shaped string (none is real): the prefix and n characters of the alphabet."""
    return prefix + "".join(random.Random(f"{prefix}{n}{seed}").choices(alphabet, k=n))


HEX = "0123456789abcdef"
B64URL = string.ascii_letters + string.digits + "_-"
UNSIGNED_JWT = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiIxMjM0NTY3ODkwIiwiYWRtaW4iOnRydWV9."
SSH2_KEY = "\n".join(["---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----", 'Comment: "rsa-key-20261127"',
                      made_up("P2/56wAAAi4AAAA3aWYtbW9k", 40), made_up("", 64), made_up("", 30) + "==",
                      "---- END SSH2 ENCRYPTED PRIVATE KEY ----"])

# (format, the line as a log, a shell or a library prints it, the secret in it)
FORMATS = [
    ("redis url, empty user", "connecting to redis://:{}@cache.internal:6379/0", "R3disPassw0rd"),
    ("redis url in Inductor's variable", "TORCHINDUCTOR_REDIS_URL=redis://:{}@10.0.0.5:6379", "R3disPassw0rd"),
    ("cookies as a Python dict", "cookies={{'sessionid': '{}', 'csrftoken': 'abc'}}", made_up("", 32)),
    ("a cookie jar's repr", "<RequestsCookieJar[<Cookie sessionid={} for example.com/>]>", made_up("", 32)),
    ("cookie in lowercase JSON", '{{"cookie": "sessionid={}; theme=dark"}}', made_up("", 32)),
    ("curl --cookie", "curl -s --cookie 'sessionid={}' https://example.com/api", made_up("", 32)),
    ("unsigned JWT", "auth header carried {} for user 1", UNSIGNED_JWT),
    ("RFC 4716 SSH2 private key", "key file:\n{}\ndone", SSH2_KEY),
    ("Slack app-level token", "socket mode with {}", "xapp-1-A0123456789-1234567890123-" + made_up("", 64, HEX)),
    ("Stripe webhook secret", "verifying with {}", made_up("whsec_", 32)),
    ("Google OAuth client secret", "client_secret {}", made_up("GOCSPX-", 28, B64URL)),
    ("Google OAuth access token", "gcloud token {} expires", made_up("ya29.a0", 120, B64URL)),
    ("Azure AD client secret", "app secret {}", made_up("", 3) + "8Q~" + made_up("", 34, B64URL + "~.")),
    ("Azure SAS signature", "GET https://acct.blob.core.windows.net/c/b.bin?sv=2022-11-02&sr=b&sp=r&sig={}",
     made_up("", 40) + "%2B" + made_up("", 6) + "%3D"),
    ("S3 presigned signature", "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={}",
     made_up("", 64, HEX)),
    ("S3 presigned session token", "https://b.s3.amazonaws.com/k?X-Amz-Security-Token={}&X-Amz-Expires=300",
     made_up("IQoJb3JpZ2luX2VjE", 300, string.ascii_letters + string.digits + "%")),
    ("AWS STS session token", "export creds {}", made_up("FwoGZXIvYXdzE", 200, string.ascii_letters + "/+")),
    ("Groq API key", "groq client {}", made_up("gsk_", 52)),
    ("Replicate API token", "replicate run with {}", made_up("r8_", 37)),
    ("Bitbucket app password", "git push with {}", made_up("ATBB", 32)),
    ("Atlassian API token", "jira token {}", made_up("ATATT3xFfGF0", 180, B64URL + "=")),
    ("Buildkite user access token", "buildkite {}", made_up("bkua_", 40, HEX)),
    ("Figma personal access token", "figma {}", made_up("figd_", 40, B64URL)),
    ("Alibaba Cloud AccessKey ID", "aliyun {}", made_up("LTAI", 20)),
    ("Tencent Cloud SecretId", "tencent {}", made_up("AKID", 32)),
    (".pgpass line", "db.example.com:5432:appdb:alice:{}", "Pgp4ss-w0rd!"),
    ("*_PASSPHRASE", "GPG_PASSPHRASE={}", "correct-horse-battery"),
    ("*_PAT", "GITHUB_PAT={}", "opaque-pat-value-42"),
    ("*_OTP", "MFA_OTP={}", "492817"),
    ("KEY_ID", "AWS_ACCESS_KEY_ID={}", "EXAMPLEKEYID0042"),
    ("COOKIE", "SESSION_COOKIE: {}", "s%3Aopaque.cookie"),
    ("SESSION", "export SESSION={}", "opaque-session-17"),
]


@pytest.mark.parametrize("fmt, line, secret", FORMATS, ids=[f[0] for f in FORMATS])
def test_each_format_is_masked(fmt, line, secret):
    from aoti_bisect.report.redact import MASK, Redactor

    shown = Redactor()(line.format(secret))
    assert MASK in shown and secret not in shown, shown
    assert not any(len(part) >= 8 and part in shown for part in re.split(r"[^A-Za-z0-9]", secret)), shown


@pytest.mark.parametrize("line", ["session = requests.Session()", "Array cookie:            ac",
                                  "ENABLE_COMPAT=1", "compiled /tmp/a.py:12:3: error: x", "PATH=/usr/bin:/bin"])
def test_the_wider_name_rule_leaves_everyday_text_alone(line):
    from aoti_bisect.report.redact import Redactor

    assert Redactor()(line) == line


def test_every_sample_detect_secrets_flags_is_masked():
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from aoti_bisect.report.redact import Redactor

    detectors = [cls() for cls in get_mapping_from_secret_type_to_class().values()]
    flagged = {}
    for fmt, line, secret in FORMATS:
        text = line.format(secret)
        found = {s.secret_value for row in text.splitlines() for d in detectors
                 for s in d.analyze_line(filename="output.log", line=row, line_number=1) if s.secret_value}
        if found:
            flagged[fmt] = found
            shown = Redactor()(text)
            assert [s for s in found if s in shown] == [], (fmt, shown)
    assert {"unsigned JWT", "RFC 4716 SSH2 private key"} <= set(flagged)  # the two the scanner flags


@pytest.mark.slow  # 15 s: 30 megabytes through the redactor
def test_redaction_is_linear_on_a_megabyte_of_hostile_text():
    sys.path.insert(0, os.path.join(REPO, "bench"))
    from redaction_linear import SEEDS, hostile

    from aoti_bisect.report.redact import Redactor

    redactor = Redactor(("hunter22",))
    # Before the bounds: 96 KB of `SECRET` took 42-65 s, and a megabyte hours. A megabyte of plain log takes about
    # half a second on one core; 4 s leaves room for a busy machine, not for a quadratic rule.
    for seed in ("SECRET", "-a.", "--token.", "password=\"\\\"", "-----BEGIN PRIVATE KEY-----\n", "eyJ",
                 "PuTTY-User-Key-File-2:", "cookies={", "ATATT3", "FwoGZXIvYXdz"):
        assert seed in SEEDS
        for text in hostile(seed, 1 << 20):
            start = time.perf_counter()
            redactor(text)
            assert time.perf_counter() - start < 4, seed


def test_what_the_console_shows_of_a_repros_output_is_redacted(tmp_path):
    token = made_up("ghp_", 36)
    script = tmp_path / "leaks.py"
    script.write_text(f"print('Authorization: Bearer {made_up('', 40)}')\n"
                      f"raise RuntimeError('export failed: remote said bad credentials for {token}')\n")
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "-v", "--runs", "1", "--stages",
                           "baseline", "--budget", "0", "--out", str(tmp_path / "run")], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": REPO})
    assert proc.returncode in (0, 1, 125), proc.stderr[-2000:]
    assert "export failed" in proc.stderr  # the message is shown (at -v), its token not
    assert token not in proc.stderr + proc.stdout and made_up("", 40) not in proc.stderr + proc.stdout


# --- 6. A bundle reads each member with a cap -----------------------------------------------------------------------

def test_a_bundle_leaves_out_a_sparse_gigabyte_without_reading_it_and_says_why(tmp_path):
    run = run_folder(tmp_path / "run")
    (run / "runs" / "baseline-000").mkdir(parents=True)
    (run / "runs" / "baseline-000" / "output.log").write_text("RuntimeError: non-finite output\n")
    (run / "minify").mkdir()
    for name in ("runs/baseline-000/hook.json", "minify/inputs.pt"):
        with open(run / name, "wb") as f:  # a GiB that costs the repro nothing: a hole
            f.truncate(1 << 30)
    (run / "minify" / "minify.json").write_text(json.dumps({"status": "verified", "message": "m"}))
    start = time.monotonic()
    proc = cli("report", str(run), "--bundle", str(tmp_path / "b.tar.gz"))
    assert proc.returncode == 0 and "left out" in proc.stderr, proc.stderr
    assert time.monotonic() - start < 30  # read whole and redacted, one GiB took minutes
    with tarfile.open(tmp_path / "b.tar.gz") as tar:
        names = tar.getnames()
        left_out = tar.extractfile("run/LEFT_OUT.txt").read().decode()
    assert "run/runs/baseline-000/hook.json" not in names and "run/minify/inputs.pt" not in names
    assert "runs/baseline-000/hook.json: over 64 MiB" in left_out and "minify/inputs.pt: over 64 MiB" in left_out
