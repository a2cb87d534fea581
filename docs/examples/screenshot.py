"""Renders a report.md as GitHub would (GFM tables, ```mermaid as a diagram, GitHub's CSS) and screenshots it.

    npm install mermaid@11 github-markdown-css     # in some folder, e.g. /tmp/render
    python docs/examples/screenshot.py docs/examples/nan_after_matmul.report.md /tmp/render/node_modules \
        docs/examples/nan_after_matmul.report.png

Needs markdown-it-py (the test extra) and a headless Chromium (`apt-get install chromium`).
"""
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile

from markdown_it import MarkdownIt

PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}
body {{ background: #fff; }} .markdown-body {{ max-width: 1012px; margin: 24px auto; padding: 32px;
border: 1px solid #d0d7de; border-radius: 6px; }}</style></head>
<body><article class="markdown-body">{body}</article>
<script>{mermaid}</script><script>mermaid.initialize({{startOnLoad: true, theme: "default"}});</script>
</body></html>"""


def render(md: str, modules: str) -> str:
    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    # GitHub turns a ```mermaid block into a diagram; mermaid.js does the same with <pre class="mermaid">.
    body = re.sub(r'<pre><code class="language-mermaid">(.*?)</code></pre>',
                  lambda m: f'<pre class="mermaid">{m.group(1)}</pre>', body, flags=re.S)
    with open(os.path.join(modules, "github-markdown-css", "github-markdown-light.css")) as f:
        css = f.read()
    with open(os.path.join(modules, "mermaid", "dist", "mermaid.min.js")) as f:
        mermaid = f.read()
    return PAGE.format(css=css, body=body, mermaid=mermaid.replace("</script", "<\\/script"))


def main(report_md: str, modules: str, png: str, height: int = 2200) -> None:
    with open(report_md) as f:
        page = render(f.read(), modules)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if chromium is None:
        sys.exit("no chromium on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.html")
        with open(path, "w") as f:
            f.write(page)
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--window-size=1100,{height}", "--virtual-time-budget=10000",
                        f"--screenshot={os.path.abspath(png)}", f"file://{path}"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    print(f"wrote {png} ({html.escape(report_md)})")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], *(int(a) for a in sys.argv[4:5]))
