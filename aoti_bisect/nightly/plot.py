"""`aoti-bisect history --plot`: each repro's nightly rate with its 95% interval, as a PNG (optional extra)."""
from __future__ import annotations

import datetime as _dt

from ..exits import UsageFailure


def plot_trend(rows: list[dict], path: str) -> None:
    try:
        import matplotlib
    except ImportError:
        raise UsageFailure("--plot needs matplotlib: pip install 'aoti-bisect[plot]'")
    matplotlib.use("Agg")  # no display on a CI host
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for repro in sorted({r["repro"] for r in rows}):
        mine = [r for r in rows if r["repro"] == repro and r["runs"]]
        if not mine:
            continue
        when = [_dt.datetime.fromisoformat(r["started"].replace("Z", "+00:00")) for r in mine]
        rate = [r["rate"] for r in mine]
        err = [[r["rate"] - r["ci95"][0] for r in mine], [r["ci95"][1] - r["rate"] for r in mine]]
        # matplotlib's date converter takes datetimes, which its stubs do not say
        ax.errorbar(when, rate, yerr=err, marker="o", capsize=3, label=repro)  # type: ignore[arg-type]
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("failure rate (95% Wilson interval)")
    ax.set_title("aoti-bisect nightly history")
    ax.legend(fontsize="small", loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise UsageFailure(f"cannot write {path}: {exc.strerror}")
    finally:
        plt.close(fig)
