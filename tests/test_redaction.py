"""Nothing secret leaves in a report or bundle (issue #21, items 16-20): a corpus of real token formats with
made-up values, the assignment and argv forms, short values, bundles made later from a clean shell, and
redaction of report data before it is serialized."""
import json
import os
import string
import subprocess
import sys
import tarfile

import pytest

from aoti_bisect.report.redact import MASK, Redactor


def fake(prefix: str, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    """A made-up token of the right shape (built at run time, so no scanner mistakes this file for a leak)."""
    return prefix + "".join(alphabet[(7 * i + 3) % len(alphabet)] for i in range(n))


UPPER_DIGITS = string.ascii_uppercase + string.digits
B64URL = string.ascii_letters + string.digits + "-_"
JWT = ".".join(["eyJ" + fake("", 30, B64URL), "eyJ" + fake("", 40, B64URL), fake("", 43, B64URL)])
RSA_KEY = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", fake("MIIEow", 58), fake("", 64), "-----END RSA PRIVATE KEY-----"])
SSH_KEY = "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", fake("b3Blbn", 60), "-----END OPENSSH PRIVATE KEY-----"])

# (format, line as a log or a shell would show it, the secret part)
CORPUS = [
    ("github classic", "remote: using {}", fake("ghp_", 36)),
    ("github oauth", "token={}", fake("gho_", 36)),
    ("github fine-grained", "GH auth with {} ok", fake("github_pat_", 22) + "_" + fake("", 59)),
    ("gitlab", "CI_JOB {} expired", fake("glpat-", 20, B64URL)),
    ("aws access key id", "aws_access_key_id {}", fake("AKIA", 16, UPPER_DIGITS)),
    ("aws secret key", "aws_secret_access_key = {}", fake("", 40, string.ascii_letters + "/+")),
    ("slack bot", "posting with {}", "xoxb-123456789012-1234567890123-" + fake("", 24)),
    ("slack webhook", "hook {}", "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/" + fake("", 24)),
    ("hugging face", "hub login {} done", fake("hf_", 34, string.ascii_letters)),
    ("openai", "client(api_key) {}", fake("sk-proj-", 48, B64URL)),
    ("anthropic", "using {}", fake("sk-ant-api03-", 93, B64URL) + "AA"),
    ("google api key", "maps {}", fake("AIza", 35, B64URL)),
    ("jwt", "session {}", JWT),
    ("stripe live", "charge via {}", fake("sk_live_", 24)),
    ("stripe restricted", "charge via {}", fake("rk_test_", 24)),
    ("npm", "//registry.npmjs.org/:_authToken={}", fake("npm_", 36)),
    ("pypi upload", "twine upload -p {}", fake("pypi-AgEIcHlwaS5vcmc", 70, B64URL)),
    ("rsa private key", "key:\n{}\nnext line", RSA_KEY),
    ("openssh private key", "{}", SSH_KEY),
    ("basic auth header", "Authorization: Basic {}", "YWRtaW46aHVudGVyMg=="),
    ("bearer auth header", "Authorization: Bearer {}", "opaque.short"),
    ("bearer in prose", "sent bearer {}", fake("", 32, B64URL)),
    ("url userinfo redis", "connect redis://admin:{}@cache:6379/0", "pa55word"),
    ("url userinfo https", "clone https://user:{}@git.example.com/org/repo.git", "tok3nvalue"),
    ("url token only", "fetch https://{}@git.example.com/x", "tok3nonly"),
    # item 17: the assignment forms
    ("bare password at line start", "password={}", "hunter2"),
    ("bare TOKEN colon at line start", "TOKEN: {}", "abc123"),
    ("api-key flag with =", "run.py --api-key={}", "k3yk3y"),
    ("password flag then value", "run.py --password {} --verbose", "s3cret"),
    ("spaces around =", "key = {}", "v4lue"),
    ("json pair", '{{"password": "{}", "user": "bob"}}', 'pw\\"with\\\\quote'),  # JSON-escaped
    ("python kwargs", "login(user='bob', passwd='{}')", "pw with space"),
]


@pytest.mark.parametrize("fmt,line,secret", CORPUS, ids=[c[0] for c in CORPUS])
def test_corpus_formats_are_masked(fmt, line, secret):
    cleaned = Redactor()(line.format(secret))
    assert MASK in cleaned and secret not in cleaned and "quote" not in cleaned, cleaned


@pytest.mark.parametrize("line", [
    "KeyError: 'weight'", "max_tokens=512 temperature=0.7", "TOKENIZERS_PARALLELISM=false", "all tests passed",
    "std::map<key_t, int>::iterator", "author: Jane Doe", "Unexpected key(s) in state_dict: 'fc.bias'",
    "see https://pytorch.org/docs/stable/torch.compiler_aot_inductor.html",
])
def test_ordinary_text_is_left_alone(line):
    assert Redactor()(line) == line


def test_assignment_keeps_quotes_and_structure():
    assert Redactor()('{"api_key": "abc", "n": 1}') == '{"api_key": "%s", "n": 1}' % MASK
    assert Redactor()("db_password = 'x y z'") == "db_password = '%s'" % MASK


def test_short_secret_values_are_masked_as_whole_tokens_only():
    r = Redactor.from_env({"DB_PASSWORD": "hunter", "PIN_TOKEN": "42x", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
                           "TOKENIZERS_PARALLELISM": "false"})
    cleaned = r("login hunter; hunters gather; code 42x, shape [1, 2]; parallel false")
    assert cleaned == f"login {MASK}; hunters gather; code {MASK}, shape [1, 2]; parallel false"


def test_long_secret_values_are_masked_even_inside_other_text():
    secret = "Zq8-long-opaque-value"
    assert secret not in Redactor.from_env({"SERVICE_TOKEN": secret})(f"prefix{secret}suffix")


def test_argv_flag_then_value_is_masked_in_the_data():
    data = {"verdict": "reproduced", "command": ["python", "repro.py", "--password", "hunter2", "--api-key=k3y", "--steps", "3"]}
    assert Redactor().data(data)["command"] == ["python", "repro.py", "--password", MASK,
                                                      f"--api-key={MASK}", "--steps", "3"]


@pytest.mark.parametrize("secret", ['pw"quote-and-more', "pw\\back\\slash-more", '"verdict"', "complete"])
def test_report_data_is_redacted_value_by_value(secret):
    data = {"verdict": "reproduced", "complete": True, "summary": f"failed with {secret}",
            "command": ["python", "x.py", secret]}
    out = Redactor.from_env({"MY_TOKEN": secret}).data(data)
    assert set(out) == set(data) and out["verdict"] == "reproduced" and out["complete"] is True
    assert out["summary"] == f"failed with {MASK}" and out["command"] == ["python", "x.py", MASK]


# End to end: real runs of tiny child scripts, then `report --bundle` from a shell without the secrets.

URL_SECRET = "Pa55-url-9c1f"
ARG_SECRET = "Arg-s3cret-77d2"
KEY_SECRET = "Key-s3cret-1b9e"
ENV_SECRET = 'Env"s3cret\\q'   # quote and backslash: the JSON-text redaction leaked these
SHORT_SECRET = "hnt7"          # shorter than the old 8-character floor


def run_bisect(tmp_path, body, args=(), env=None, json_out=False):
    script = tmp_path / "repro.py"
    script.write_text(body)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "run", str(script), "--stages", "baseline",
                           "--runs", "1", "--out", str(out), *(["--json"] if json_out else []), "--", *args],
                          capture_output=True, text=True, env=dict(os.environ, **(env or {})), timeout=600)
    return proc, out


def make_bundle(tmp_path, out):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AOTI_TEST_")}
    bundle = tmp_path / "b.tar.gz"
    proc = subprocess.run([sys.executable, "-m", "aoti_bisect", "report", str(out), "--bundle", str(bundle)],
                          capture_output=True, text=True, env=clean, timeout=600)
    assert proc.returncode == 0 and proc.stdout.strip() == str(bundle), proc.stderr
    with tarfile.open(bundle) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers()
                if m.isfile()}, proc.stderr


@pytest.mark.slow
def test_no_secret_reaches_report_json_stdout_or_a_later_bundle(tmp_path):
    body = ("import os, sys\n"
            "print('argv:', sys.argv[1:])\n"
            "print('url:', os.environ['TORCHINDUCTOR_REDIS_URL'])\n"
            "print('env secret:', os.environ['AOTI_TEST_DB_PASSWORD'])\n"
            "print('short secret:', os.environ['AOTI_TEST_PIN_TOKEN'], 'hnt7x stays')\n"
            "raise SystemExit('failed')\n")
    env = {"TORCHINDUCTOR_REDIS_URL": f"redis://admin:{URL_SECRET}@cache:6379",
           "AOTI_TEST_DB_PASSWORD": ENV_SECRET, "AOTI_TEST_PIN_TOKEN": SHORT_SECRET}
    args = ["--db", f"redis://admin:{URL_SECRET}@cache", "--password", ARG_SECRET, f"--api-key={KEY_SECRET}"]
    proc, out = run_bisect(tmp_path, body, args, env, json_out=True)
    assert proc.returncode == 1, proc.stderr
    log = (out / "runs" / "baseline-000" / "output.log").read_text()
    assert ENV_SECRET in log and ARG_SECRET in log  # raw logs stay local, unredacted
    report = json.loads(proc.stdout)
    assert report == json.loads((out / "report.json").read_text())
    assert report["environment"]["env"]["TORCHINDUCTOR_REDIS_URL"] == f"redis://admin:{MASK}@cache:6379"
    bundle, _ = make_bundle(tmp_path, out)
    assert {"report.json", "report.md", "runs/baseline-000/output.log", "runs/baseline-000/rerun.sh",
            "runs/baseline-000/spec.json"} <= set(bundle)
    assert "LEFT_OUT.txt" not in bundle
    texts = {"stdout": proc.stdout, "report.md": (out / "report.md").read_text(),
             "report.json": (out / "report.json").read_text(), **bundle}
    for name, text in texts.items():
        for secret in (URL_SECRET, ARG_SECRET, KEY_SECRET, ENV_SECRET, json.dumps(ENV_SECRET)[1:-1],
                       SHORT_SECRET + " "):
            assert secret not in text, (name, secret)
    assert "hnt7x stays" in bundle["runs/baseline-000/output.log"]
    assert json.loads(bundle["runs/baseline-000/spec.json"])["argv"][-3:] == ["--password", MASK,
                                                                            f"--api-key={MASK}"]


@pytest.mark.slow
def test_a_bundle_made_later_from_a_clean_shell_holds_no_secret_of_the_run(tmp_path):
    body = "import os\nraise SystemExit('failed: ' + os.environ['AOTI_TEST_SERVICE_TOKEN'])\n"
    proc, out = run_bisect(tmp_path, body, env={"AOTI_TEST_SERVICE_TOKEN": "opaque-9f8e7d6c"})
    assert proc.returncode == 1, proc.stderr
    bundle, _ = make_bundle(tmp_path, out)  # AOTI_TEST_* are not in the bundling shell
    assert "failed: " + MASK in bundle["runs/baseline-000/output.log"]
    assert not [name for name, text in bundle.items() if "opaque-9f8e7d6c" in text]
    assert "opaque-9f8e7d6c" not in (out / "redactions.json").read_text()  # the record holds no value


@pytest.mark.slow
def test_a_bundle_leaves_out_files_changed_after_the_run(tmp_path):
    proc, out = run_bisect(tmp_path, "raise SystemExit('failed')\n")
    assert proc.returncode == 1, proc.stderr
    with open(out / "runs" / "baseline-000" / "output.log", "a") as f:
        f.write("appended later\n")
    bundle, stderr = make_bundle(tmp_path, out)
    assert "runs/baseline-000/output.log" not in bundle and "output.log" in bundle["LEFT_OUT.txt"]
    assert "left out" in stderr and "runs/baseline-000/spec.json" in bundle


@pytest.mark.parametrize("secret", ['"verdict"', "complete", "reproduced"])
def test_a_secret_equal_to_a_report_word_neither_crashes_nor_renames(tmp_path, secret):
    proc, out = run_bisect(tmp_path, "raise SystemExit('failed')\n", env={"AOTI_TEST_TOKEN": secret})
    assert proc.returncode == 1, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "reproduced" and report["complete"] is True
