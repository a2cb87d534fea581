"""A manifest entry with a `setup` step (scenarios check's: building the package a repro loads) is left out of a
night, saying so, rather than run with `{setup}` unresolved."""
import sys

from aoti_bisect.nightly.sets import load_set


def test_an_entry_with_a_setup_step_is_left_out_of_a_night_and_said(tmp_path, capsys):
    (tmp_path / "a.py").write_text("print('ok')\n")
    (tmp_path / "manifest.toml").write_text(
        '[[scenario]]\nname = "plain"\nscript = "a.py"\n\n'
        '[[scenario]]\nname = "built"\nscript = "a.py"\nsetup = ["a.py", "{setup}/p.pt2"]\nargs = ["{setup}/p.pt2"]\n')
    repros = load_set(str(tmp_path), sys.executable)
    assert [r.name for r in repros] == ["plain"]
    assert "leaving out built: its setup step runs only under `scenarios check`" in capsys.readouterr().err
