"""What a hostile or broken repro, environment or input cannot do: leak a secret (through an excerpt's edge, a linked
log, a nightly file), turn a usage error or a skip into a verdict, or crash aoti-bisect (a deleted run folder, a
full disk, a hand-edited report); one or more adversarial tests per defect class (issue #30). Cheap scripts, no
torch."""
import json
import os
import random
import subprocess
import sys
import tarfile

import pytest

from aoti_bisect.files.own import LINKED_LOG, read_log
from aoti_bisect.report.bundle import _packable
from aoti_bisect.report.excerpt import EXCERPT_READ, LINE_CHARS, log_excerpt
from aoti_bisect.run.slots import cores
from aoti_bisect.report.redact import MASK, Redactor
from aoti_bisect.run import process

# Fakes of the right shapes, made up here (none is a real credential).
KEY_LINES = ["MIIEowIBAAKCAQEAx" + "Q7v3kR9pZ2mW8nT4bY6cU1dE5fG0hJ3kL7mN2oP9qR4sT6uV8wX1yZ3aB5cD"[i % 20:] + f"{i:02d}"
             for i in range(25)]
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(KEY_LINES) + "\n-----END RSA PRIVATE KEY-----"
GH_TOKEN = "ghp_" + "Zx81Qw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lz8X"
AWS_ID = "AKIA" + "QWERTYUIOPASDFGH"


def cli(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "aoti_bisect", *args], capture_output=True, timeout=timeout,
                          env=env)


def leaked(text: str) -> list[str]:
    """Any 10 characters of a secret's body: a cut token's half is a leak too."""
    pieces = [GH_TOKEN[i:i + 10] for i in range(4, len(GH_TOKEN) - 9, 5)] + [AWS_ID[4:14], AWS_ID[-10:]]
    pieces += [line[i:i + 10] for line in KEY_LINES for i in (0, 20)]
    return [s for s in pieces if s in text]


# --- Secrets: masked before any cut -------------------------------------------------------------------------

def test_a_key_block_cut_by_the_excerpts_head_is_masked_whole(tmp_path):
    # The head shows 15 lines; the key starts at line 5 and ends at line 32: the head alone holds BEGIN and key
    # lines but no END, so masking the cut head found no block.
    log = tmp_path / "output.log"
    log.write_text("\n".join([f"line {i}" for i in range(5)] + [PRIVATE_KEY] + [f"x {i}" for i in range(200)]))
    excerpt = log_excerpt(str(log), redactor=Redactor())
    assert excerpt.head and not leaked(json.dumps(excerpt.to_json())), excerpt.head


def test_a_key_block_that_straddles_the_excerpts_read_edge_is_masked(tmp_path):
    # Only the tail of a big log is read: the key's BEGIN lies before it, its END in it.
    log = tmp_path / "output.log"
    filler = ("f" * 99 + "\n") * (3 * EXCERPT_READ // 100)
    cut = len(filler) - EXCERPT_READ + 200  # inside the key
    text = filler[:cut] + "\n" + PRIVATE_KEY + "\n" + filler[cut:] + "\n".join(f"end {i}" for i in range(5))
    log.write_text(text)
    excerpt = log_excerpt(str(log), tail_lines=10_000, redactor=Redactor())
    assert not leaked(json.dumps(excerpt.to_json()))


def test_a_token_past_the_line_clip_is_not_cut_into_an_unrecognisable_half(tmp_path):
    log = tmp_path / "output.log"
    log.write_text("Error: " + "y" * (LINE_CHARS - 20) + f" {GH_TOKEN} more\n")
    excerpt = log_excerpt(str(log), redactor=Redactor())
    assert GH_TOKEN[:16] not in json.dumps(excerpt.to_json()), excerpt


def test_a_token_at_the_capped_logs_splice_is_not_split(tmp_path):
    # head 4 KiB, tail 4 KiB: the token lies across the 4 KiB mark, and another across the tail's start.
    script = ("import sys\nw = sys.stdout.write\n"
              f"w('a' * 4070 + ' {GH_TOKEN} x\\n')\n"
              "w(('m' * 99 + '\\n') * 400)\n"
              f"w('b' * 4060 + ' {AWS_ID} y {GH_TOKEN} z\\n' + ('t' * 29 + '\\n') * 10)\n")
    log = tmp_path / "output.log"
    exit = process.execute([sys.executable, "-c", script], dict(os.environ), str(tmp_path), str(log), 60,
                           process.OutputLimits(head_bytes=4096, tail_bytes=4200))
    assert exit.dropped_bytes > 0
    text = Redactor()(read_log(str(log)))
    assert "dropped here" in text and not leaked(text), text[-600:]


# --- Secrets: never a link ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_log_replaced_by_a_link_is_never_read(tmp_path, kind):
    secret = tmp_path / "id_ed25519"
    secret.write_text(PRIVATE_KEY.replace("RSA", "OPENSSH") + "\n" + "s3cr3t-notes\n")
    log = tmp_path / "run" / "output.log"
    log.parent.mkdir()
    (os.symlink if kind == "symlink" else os.link)(secret, log)
    assert read_log(str(log)) == LINKED_LOG
    assert "s3cr3t-notes" not in json.dumps(log_excerpt(str(log)).to_json())
    assert not _packable(str(tmp_path / "run"), str(log))


def test_a_repro_that_hard_links_its_own_log_leaks_nothing(tmp_path):
    secret = tmp_path / "notes.txt"
    secret.write_text("my s3cr3t-notes\n")
    script = tmp_path / "linker.py"
    # The child's cwd is runs/<stage>-NNN/cwd: its log is ../output.log.
    script.write_text("import os, sys\n"
                      "os.unlink('../output.log')\n"
                      f"os.link({str(secret)!r}, '../output.log')\n"
                      "sys.exit(1)\n")
    out = tmp_path / "run"
    proc = cli(str(script), "--stages", "baseline", "--runs", "1", "--out", str(out))
    assert proc.returncode in (0, 1, 125), proc.stderr
    bundle = tmp_path / "b.tar.gz"
    proc = cli("report", str(out), "--bundle", str(bundle))
    texts = [(out / "report.md").read_text(), (out / "report.json").read_text()]
    with tarfile.open(bundle) as tar:
        texts += [tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()]
    assert not any("s3cr3t-notes" in t for t in texts)


# --- Secrets: nightly files are made to be published ---------------------------------------------------------

def test_nothing_secret_reaches_any_nightly_file_or_the_history(tmp_path):
    sets = tmp_path / "set"
    sets.mkdir()
    # A secret from the environment (any format), a token format in the message, a key in the output.
    (sets / "leaky.py").write_text(
        "import os, sys\n"
        "print(os.environ['DEPLOY_TOKEN_VALUE_FOR_TEST'])\n"
        f"print('''{PRIVATE_KEY}''')\n"
        f"raise RuntimeError('upload failed with {GH_TOKEN} for ' + os.environ['DEPLOY_TOKEN_VALUE_FOR_TEST'])\n")
    env = {**os.environ, "MY_DEPLOY_TOKEN": "pl41n-env-v4lue", "DEPLOY_TOKEN_VALUE_FOR_TEST": "pl41n-env-v4lue"}
    proc = cli("nightly", str(sets), "--runs", "2", "--jobs", "1", "--out", str(tmp_path / "night"),
               "--db", str(tmp_path / "h.sqlite3"), "--json", env=env)
    assert proc.returncode in (0, 1), proc.stderr
    published = [proc.stdout.decode(), proc.stderr.decode()]
    for root, dirs, names in os.walk(tmp_path / "night"):
        dirs[:] = [d for d in dirs if d != "runs"]  # the raw run folders, as under `run`: never published as such
        published += [open(os.path.join(root, n), errors="replace").read() for n in names
                      if n.endswith((".json", ".md", ".xml", ".jsonl"))]
    published.append(open(tmp_path / "h.sqlite3", "rb").read().decode("latin-1"))
    hist = cli("history", "--db", str(tmp_path / "h.sqlite3"), "--json", env=env)
    published.append(hist.stdout.decode())
    assert "upload failed" in "".join(published)  # the message is there, masked
    for text in published:
        assert "pl41n-env-v4lue" not in text and not leaked(text), text[:2000]


# --- Wrong verdicts: a nightly set's scripts are checked as `run` checks its SCRIPT ----------------------------

@pytest.mark.parametrize("make", ["fifo", "folder", "loop"])
def test_a_set_entry_that_is_no_script_is_refused_before_any_run(tmp_path, make):
    from aoti_bisect.nightly.sets import SetError, load_set

    sets = tmp_path / "set"
    sets.mkdir()
    (sets / "fine.py").write_text("print('ok')\n")
    odd = sets / "odd.py"
    if make == "fifo":
        os.mkfifo(odd)
    elif make == "folder":
        odd.mkdir()
        (odd / "data.txt").write_text("x")
    else:
        os.symlink(sets / "odd2.py", odd)
        os.symlink(odd, sets / "odd2.py")
    with pytest.raises(SetError, match="odd"):
        load_set(str(sets), sys.executable)
    # And in a manifest
    (tmp_path / "m.toml").write_text(f'[[repro]]\nname = "odd"\nscript = "{odd}"\n')
    with pytest.raises(SetError, match="odd"):
        load_set(str(tmp_path / "m.toml"), sys.executable)


def test_a_timeout_below_the_interpreters_start_up_is_a_usage_error(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("print('ok')\n")
    proc = cli(str(script), "--timeout", "0.001", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2 and b"at least 1 s" in proc.stderr, proc.stderr
    (tmp_path / "m.toml").write_text(f'[[repro]]\nname = "ok"\nscript = "{script}"\ntimeout = 0.01\n')
    proc = cli("nightly", str(tmp_path / "m.toml"), "--out", str(tmp_path / "n"), "--db", str(tmp_path / "h"))
    assert proc.returncode == 2 and b"at least 1 s" in proc.stderr, proc.stderr


# --- The `git bisect run` contract -----------------------------------------------------------------------------

def test_a_python_whose_venv_did_not_build_is_a_skip_not_bad(tmp_path):
    script = tmp_path / "ok.py"
    script.write_text("print('ok')\n")
    missing = cli(str(script), "--python", str(tmp_path / "venv" / "bin" / "python"), "--out", str(tmp_path / "a"))
    assert missing.returncode == 125, missing.stderr
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'error while loading shared libraries: libpython3.11.so' >&2\nexit 127\n")
    broken.chmod(0o755)
    proc = cli(str(script), "--python", str(broken), "--out", str(tmp_path / "b"))
    assert proc.returncode == 125, proc.stderr


@pytest.mark.parametrize("word, hint", [("scenario", "scenarios"), ("reprot", "report"), ("nigthly", "nightly"),
                                        ("frobnicate", "commands:")])
def test_a_mistyped_command_word_is_a_usage_error_with_a_suggestion(tmp_path, word, hint):
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", word, "list"], capture_output=True, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 2 and hint.encode() in proc.stderr, proc.stderr
    assert proc.stderr.count(b"\n") == 1


def test_a_script_named_like_a_word_still_runs(tmp_path):
    (tmp_path / "scenario").write_text("print('ok')\n")
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "scenario", "--stages", "baseline", "--runs", "1",
                           "--out", "r"], capture_output=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr


# --- Wrong verdicts: a child starts as it would from a shell --------------------------------------------------

CHECK_DISPOSITIONS = """\
import sys
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
ignored, blocked = int(status['SigIgn'], 16), int(status['SigBlk'], 16)
bad = [n for n in (1, 2, 3, 10, 15) if (ignored | blocked) >> (n - 1) & 1]
print('ignored or blocked:', bad)
sys.exit(1 if bad else 0)
"""


def test_a_repro_starts_with_default_signals_even_under_nohup_and_a_background_job(tmp_path):
    import signal

    script = tmp_path / "signals.py"
    script.write_text(CHECK_DISPOSITIONS)

    def hostile_start():  # nohup (HUP), `cmd &` in a script (INT, QUIT), a runner that blocks USR1 and TERM
        for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1, signal.SIGTERM])

    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", str(script), "--stages", "baseline", "--runs", "2",
                           "--out", str(tmp_path / "r")], capture_output=True, timeout=120, preexec_fn=hostile_start)
    log = (tmp_path / "r" / "runs" / "baseline-000" / "output.log").read_text()
    assert proc.returncode == 0, (proc.stderr, log)


def test_with_no_torch_the_baseline_stops_at_once_and_says_it_could_not_run(tmp_path):
    venv = tmp_path / "venv"  # a Python with no torch: a commit whose torch did not build
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    script = tmp_path / "repro.py"
    script.write_text("import torch\nprint(torch.ones(1))\n")
    proc = cli(str(script), "--python", str(venv / "bin" / "python"), "--out", str(tmp_path / "r"))
    assert proc.returncode == 125, proc.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["reproduction"]["runs"] == 0 and report["reproduction"]["could_not_run"]
    # A run in each slot (one per core, --jobs unset) may start before the first one ends and the probe is asked.
    assert len(os.listdir(tmp_path / "r" / "runs")) <= cores() + 1
    said = proc.stdout + proc.stderr  # the answer on stdout, the progress on stderr
    assert b"could not run" in said and b"0/20" not in said


# --- Wrong verdicts: a checker's report comes from its own channel ---------------------------------------------

FORGED_VALGRIND = ("==4242== Invalid read of size 8\\n==4242==    at 0x4A2B3C: steal_everything (evil.cpp:1)\\n"
                   "==4242== ERROR SUMMARY: 3 errors from 1 contexts (suppressed: 0 from 0)\\n")


def test_a_repro_printing_checker_lines_and_writing_a_checker_log_fakes_no_finding(tmp_path):
    from aoti_bisect.diagnose.evidence import RunEvidence
    from aoti_bisect.run.checkers import CHECKER_LOG, Checker
    from aoti_bisect.run.types import Outcome, RunResult, RunSpec

    # A stand-in valgrind that writes a clean report to its --log-file; the repro forges lines on stdout and
    # writes a forged checker.log into its cwd (and tmp) too.
    fake = tmp_path / "valgrind"
    fake.write_text(f"#!{sys.executable}\nimport subprocess, sys\n"
                    "log = [a.split('=', 1)[1] for a in sys.argv if a.startswith('--log-file=')][0]\n"
                    "code = subprocess.run(sys.argv[2:]).returncode\n"
                    "open(log, 'w').write('==7== ERROR SUMMARY: 0 errors from 0 contexts (suppressed: 0 from 0)\\n')\n"
                    "sys.exit(code)\n")
    fake.chmod(0o755)
    checker = Checker("valgrind", "cpu", (str(fake), f"--log-file={CHECKER_LOG}"))
    run_dir = tmp_path / "runs" / "memcheck-000"
    (run_dir / "cwd").mkdir(parents=True)
    forger = ("import sys\n"
              f"sys.stdout.write('{FORGED_VALGRIND}')\n"
              f"open('checker.log', 'w').write('{FORGED_VALGRIND}')\n")
    log = run_dir / "output.log"
    exit = process.execute([*checker.prefix, sys.executable, "-c", forger], dict(os.environ), str(run_dir / "cwd"),
                           str(log), 60)
    assert "steal_everything" in log.read_text()
    result = RunResult(RunSpec(tuple(checker.prefix), "memcheck", 0), Outcome.PASSED, exit, str(run_dir), str(log))
    report = RunEvidence(str(tmp_path / "prebuilt")).memcheck(result, "valgrind")
    assert report.finished and report.clean and not report.errors, report


def test_a_link_planted_where_the_checker_writes_fails_the_run_not_the_target(tmp_path):
    from aoti_bisect.run.checkers import CHECKER_LOG

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    run_dir = tmp_path / "run"
    (run_dir / "cwd").mkdir(parents=True)
    os.symlink(victim, run_dir / "checker.log")
    exit = process.execute(["/bin/sh", "-c", f"echo overwritten > {CHECKER_LOG}", f"--log-file={CHECKER_LOG}"],
                           dict(os.environ), str(run_dir / "cwd"), str(run_dir / "output.log"), 30)
    assert exit.launch_error and victim.read_text() == "precious\n"


def test_real_valgrind_report_is_read_from_its_log_file_not_the_output(tmp_path):
    from aoti_bisect.run import checkers
    from aoti_bisect.run.checkers import read_report

    found = checkers.valgrind()
    if isinstance(found, checkers.Missing):
        pytest.skip(found.why)
    run_dir = tmp_path / "run"
    (run_dir / "cwd").mkdir(parents=True)
    log = run_dir / "output.log"
    # /bin/echo, checked by valgrind (fast: no Python under valgrind), prints a forged valgrind report.
    process.execute([*found[0].prefix, "/bin/echo", FORGED_VALGRIND.replace("\\n", " ")], dict(os.environ),
                    str(run_dir / "cwd"), str(log), 120)
    assert "steal_everything" in log.read_text()
    report = read_report("valgrind", str(run_dir), str(log))
    assert report.finished and report.clean, report


# --- Crashes: one line and the right code, never a traceback or 255 ---------------------------------------------

@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One real run, made once; each test edits a copy."""
    tmp = tmp_path_factory.mktemp("finished")
    script = tmp / "fails.py"
    script.write_text("raise SystemExit(3)\n")
    proc = cli(str(script), "--stages", "baseline", "--runs", "1", "--out", str(tmp / "run"))
    assert proc.returncode == 1, proc.stderr
    return tmp / "run"


@pytest.mark.parametrize("edit", [
    lambda d: d.update(summary=5),
    lambda d: d.update(masked=["x"]),
    lambda d: d["culprit"].update(kind="kernel", kernel="k", origin="not an object"),
    lambda d: d.update(next_steps=[{"nested": 1}]),
    lambda d: d["reproduction"].update(could_not_run="yes", runs=0),
])
def test_a_hand_edited_report_with_a_wrong_type_is_one_line(tmp_path, finished_run, edit):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(finished_run, out, symlinks=True)
    data = json.loads((out / "report.json").read_text())
    edit(data)
    (out / "report.json").write_text(json.dumps(data))
    for fmt in ("md", "text"):
        proc = cli("report", str(out), "--format", fmt)
        assert proc.returncode in (0, 1, 2), proc.stderr
        assert b"Traceback" not in proc.stderr and proc.stderr.count(b"\n") <= 1, proc.stderr


# Seeded and named: every collection of the file has the same tests, with ids one can read (not 4 KiB of bytes).
@pytest.mark.parametrize("content", [random.Random(0).randbytes(4096), b"[" * 100_000 + b"\n",
                                     b'{"type": "header"' + b"\xff\xfe\n"], ids=["random", "deep", "not-utf8"])
def test_a_records_file_of_garbage_is_one_line(tmp_path, content):
    bad = tmp_path / "shard-0-of-1.jsonl"
    bad.write_bytes(content)
    proc = cli("merge", str(bad), "--out", str(tmp_path / "m"), "--db", str(tmp_path / "h.sqlite3"))
    assert proc.returncode == 2 and b"Traceback" not in proc.stderr and proc.stderr.count(b"\n") == 1, proc.stderr


def test_a_repro_that_deletes_its_own_run_folder_is_a_skip_not_a_crash(tmp_path):
    script = tmp_path / "vandal.py"
    script.write_text("import os, shutil\nshutil.rmtree(os.path.dirname(os.getcwd()))\nraise SystemExit(1)\n")
    proc = cli(str(script), "--stages", "baseline", "--runs", "2", "--out", str(tmp_path / "run"))
    assert proc.returncode == 125 and b"Traceback" not in proc.stderr and b"internal error" not in proc.stderr


@pytest.mark.parametrize("err", ["ENOSPC", "EDQUOT", "EROFS"])
def test_a_full_disk_under_out_is_a_skip(tmp_path, err):
    # The disk fills while the report is written: the machine's state at this commit, not a bug (255) nor bad (1).
    code = ("import errno, sys\n"
            "import aoti_bisect.report.model as m, aoti_bisect.cli as c\n"
            f"def full(self): raise OSError(errno.{err}, 'No space left on device', self.run_dir)\n"
            "m.Report.write = full\n"
            f"sys.argv = ['aoti-bisect', {str(tmp_path / 'ok.py')!r}, '--stages', 'baseline', '--runs', '1',"
            f" '--out', {str(tmp_path / 'run')!r}]\n"
            "c.entry()\n")
    (tmp_path / "ok.py").write_text("print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 125 and b"Traceback" not in proc.stderr, proc.stderr


# --- Small faults -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--precision", "0.05"], "used only with --until-confident"),
    (["--until-confident", "--runs", "10", "--min-runs", "50"], "above --runs 10"),
    (["--shards", "4"], "used only with --executor submitit"),
    (["--partition", "gpu", "--shard-timeout-min", "5"], "are used only with --executor submitit"),
    (["--shard", "0/2", "--executor", "submitit"], "give one of them"),
    (["--shard", "0/2", "--bisect-on-change"], "a shard (--shard) is not judged"),
    (["--shard", "0/2", "--json"], "a shard (--shard) is not judged"),
])
def test_contradictory_nightly_options_are_refused(tmp_path, args, words):
    (tmp_path / "r.py").write_text("print('ok')\n")
    proc = cli("nightly", str(tmp_path), *args, "--out", str(tmp_path / "n"), "--db", str(tmp_path / "h"))
    assert proc.returncode == 2 and words.encode() in proc.stderr, proc.stderr
    assert not (tmp_path / "n").exists() or not os.listdir(tmp_path / "n")


def test_ctrl_c_in_the_first_moments_leaves_the_out_folder_reusable(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    out = tmp_path / "run"
    code = ("import sys\nimport aoti_bisect.cli as c\n"
            "def interrupted(*a): raise KeyboardInterrupt\n"
            "c.check_python_runs = interrupted\n"
            f"sys.argv = ['aoti-bisect', {str(tmp_path / 'ok.py')!r}, '--python', sys.executable, '--stages',"
            f" 'baseline', '--runs', '1', '--out', {str(out)!r}]\n"
            "c.entry()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == 130, proc.stderr
    again = cli(str(tmp_path / "ok.py"), "--stages", "baseline", "--runs", "1", "--out", str(out))
    assert again.returncode == 0, again.stderr


def test_no_resource_warning_at_exit(tmp_path):
    (tmp_path / "ok.py").write_text("print('ok')\n")
    proc = subprocess.run([sys.executable, "-X", "dev", "-W", "always::ResourceWarning", "-m", "aoti_bisect",
                           str(tmp_path / "ok.py"), "--stages", "baseline", "--runs", "2", "--out",
                           str(tmp_path / "run")], capture_output=True, timeout=120)
    assert proc.returncode == 0 and b"ResourceWarning" not in proc.stderr, proc.stderr


def test_a_name_that_is_not_utf8_leaves_a_valid_report_md(tmp_path):
    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(folder)
    with open(os.path.join(folder, b"r\xff.py"), "w") as f:
        f.write("raise SystemExit(2)\n")
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", os.path.join(folder, b"r\xff.py"), "--stages",
                           "baseline", "--runs", "1", "--out", str(tmp_path / "run")], capture_output=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    (tmp_path / "run" / "report.md").read_bytes().decode("utf-8")  # strict: valid UTF-8


def test_a_read_only_history_that_sqlite_cannot_lock_is_still_read(tmp_path, monkeypatch):
    import sqlite3

    from aoti_bisect.nightly.history import History

    History(str(tmp_path / "h.sqlite3")).close()
    real = sqlite3.connect

    def no_shm(database, *a, **kw):  # what a reader meets on a read-only folder: WAL's -shm cannot be created
        if "immutable=1" not in str(database):
            raise sqlite3.OperationalError("unable to open database file")
        return real(database, *a, **kw)

    monkeypatch.setattr(sqlite3, "connect", no_shm)
    store = History(str(tmp_path / "h.sqlite3"), readonly=True)
    assert store.trend() == []
    store.close()


# --- The rule set: detect-secrets' and gitleaks' shapes, high-entropy assignments, no false positives ----------

@pytest.mark.parametrize("secret", [
    "SG." + "aB3dE5gH7jK9mN1pQ3sT5v" + "." + "wX7yZ9aB1cD3eF5gH7iJ9kL1mN3oP5qR7sT9uV1wX3yZ",  # SendGrid
    "sq0csp-" + "aB3dE5gH7jK9mN1pQ3sT5vWx7yZ9aB1cD3eF5gH7iJ",  # Square OAuth
    "AccountKey=" + "aB3dE5gH7jK9mN1pQ3sT5vWx7yZ9aB1cD3eF5gH7iJ9kL1mN3oP5qR7sT9uV1wX3yZ5aB7cD9eF1gH3iJ5kL7mN9o==",
    "12345678" + ":AA" + "aB3dE5gH7jK9mN1pQ3sT5vWx7yZ9aB1cD",  # Telegram bot
    "glpat-" + "aB3dE5gH7jK9mN1pQ3sT",
    "https://discord.com/api/webhooks/123456789/" + "aB3dE5gH7jK9mN1pQ3sT5vWx",
    "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nPrivate-Lines: 1\nAAAAB3NzaC1yc2E\nPrivate-MAC: 0a1b2c3d",
])
def test_maintained_scanner_shapes_are_masked(secret):
    cleaned = Redactor()(f"log: {secret} end")
    assert MASK in cleaned and secret[-12:] not in cleaned, cleaned


@pytest.mark.parametrize("line", [
    "signing_material = 'Kx9vQ2mZ7pL4wR8tN3bY6cH1dF5gJ0sA'",  # any name: the value's entropy decides
    "CONFIG_BLOB=Kx9vQ2mZ7pL4wR8tN3bY6cH1dF5gJ0sAxY7",
    '{"opaque": "Kx9vQ2mZ7pL4wR8tN3bY6cH1dF5gJ0sA+/xY7="}',
])
def test_high_entropy_assignments_are_masked(line):
    cleaned = Redactor()(line)
    assert "Kx9vQ2mZ7pL4wR8tN3bY6cH" not in cleaned, cleaned


@pytest.mark.parametrize("line", [
    "commit=0123456789abcdef0123456789abcdef01234567",  # hex: at most 4 bits a character
    "kernel: cfunction_vectorcall_FASTCALL_KEYWORDS",
    "TORCHINDUCTOR_CACHE_DIR=/tmp/aoti-bisect-runs/20261125-101010-123456/cache/default",
    "cache_entry=cq3xkz5ubh2lgbz7d2ca3v5xwuhumpzu7ql4w3ouzbqxdkqt5dpe",  # inductor's lowercase cache key
])
def test_everyday_assignments_are_kept(line):
    assert Redactor()(line) == line


def test_no_false_positive_on_the_bundled_scenarios_logs():
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "redaction_fp.py")
    proc = subprocess.run([sys.executable, bench], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "masks: 0 " in proc.stdout, proc.stdout


def test_a_token_at_the_excerpts_read_edge_in_a_line_without_end_is_not_cut(tmp_path):
    # One endless line (no line end for megabytes): the excerpt's reads end inside it.
    log = tmp_path / "output.log"
    line = ("w" * 70 + " ") * (EXCERPT_READ // 71 + 2)
    first = EXCERPT_READ + 64 * 1024 - 20  # where the head's read ends, give or take a word
    body = (line * 4)[:first] + f" {GH_TOKEN} " + (line * 4)[first:]
    tail_edge = len(body) + len(GH_TOKEN) + 2 - EXCERPT_READ - 20  # the tail read starts inside the token
    body = body[:tail_edge] + f" {GH_TOKEN} " + body[tail_edge:]
    log.write_text(body)
    excerpt = log_excerpt(str(log), redactor=Redactor())
    assert not leaked(json.dumps(excerpt.to_json())), [p for p in leaked(json.dumps(excerpt.to_json()))]
