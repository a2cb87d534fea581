"""The house rules of issue #49 the code itself can be checked for: no function in aoti_bisect/ over 60 lines."""
import ast
import pathlib
import textwrap

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "aoti_bisect"
MAX_LINES = 60


def long_functions(root: pathlib.Path, limit: int) -> list[str]:
    """'path:line name (n lines)' for each function longer than `limit`, counted from its `def` (decorators left
    out) to the last line of its body."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_sixty_lines():
    long = long_functions(PACKAGE, MAX_LINES)
    assert not long, f"functions over {MAX_LINES} lines: " + "; ".join(long)


def test_the_count_runs_from_the_def_to_the_last_line_of_the_body(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    three = "x = 1\ny = 2\nz = 3\n"
    (package / "m.py").write_text("@staticmethod\ndef short():\n" + textwrap.indent(three, " " * 4)
                                  + "\n\ndef nested():\n    def inner():\n" + textwrap.indent(three, " " * 8))
    # short: its def and 3 body lines (the decorator is not counted); inner: 4; nested: its def and inner's 4.
    assert sorted(long_functions(package, 3)) == ["pkg/m.py:2 short (4 lines)", "pkg/m.py:8 nested (5 lines)",
                                                  "pkg/m.py:9 inner (4 lines)"]
