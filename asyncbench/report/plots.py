"""The report's figures, drawn with matplotlib's object API (no pyplot global state, no
display needed) and returned as PNG bytes for embedding in one HTML file.

Runs are coloured bars or lines; published reference rows are grey markers or dashed
lines, so a reader sees at a glance where a run sits among the papers' models.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from ..benchmarks import score_type
from ..ledger import SETTLED
from ..serving import Point
from .data import RunReport
from .model import Column, Leaderboard, Row

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn (`report --format html`)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.typing import ColorType

# prompt-token bins for runs whose benchmark has no length breakdown of its own
TOKEN_BINS: tuple[tuple[str, int], ...] = (("<4k", 4000), ("4-8k", 8000), ("8-16k", 16000), ("16-32k", 32000),
                                           ("32k+", 1 << 62))
REF_COLOR = "#9a9a9a"


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(fig: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _colors(n: int) -> list[ColorType]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def _empty(ax: Axes, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#555")
    ax.set_axis_off()


def _chart_columns(board: Leaderboard) -> list[Column]:
    """Categories, else tasks, else the overall: what a score chart has bars for."""
    for wanted in ("cat:", "task:"):
        cols = [c for c in board.columns if c.key.startswith(wanted)]
        if cols:
            return cols
    return [c for c in board.columns if c.key == "overall"]


def _whiskers(row: Row, values: list[float], cols: list[Column]) -> list[list[float]]:
    """Below and above each bar: its 95% bootstrap interval (asymmetric), where it has one."""
    below, above = [], []
    for v, c in zip(values, cols):
        lo, hi = row.intervals.get(c.key, (v, v))
        below.append(max(0.0, v - lo))
        above.append(max(0.0, hi - v))
    return [below, above]


def _reference_marks(ax: Axes, refs: list[Row], cols: list[Column]) -> None:
    for k, ref in enumerate(refs):
        pts = [(value, j) for j, c in enumerate(cols) if (value := ref.cells.get(c.key)) is not None]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker="x", color=REF_COLOR, zorder=3,
                       label="published (paper)" if k == 0 else None)


def score_chart(board: Leaderboard) -> bytes:
    """Scores per category (or per task when the benchmark has no categories), one bar per
    run with its 95% interval as whiskers, published models as grey crosses."""
    cols = _chart_columns(board)
    runs = [r for r in board.rows if r.kind == "run"]
    fig = _figure(10, max(2.5, 0.45 * len(cols) * max(1, len(runs)) ** 0.5 + 1.2))
    ax = fig.add_subplot()
    height = 0.8 / max(1, len(runs))
    for i, (run, color) in enumerate(zip(runs, _colors(len(runs)))):
        ys = [j + (i - (len(runs) - 1) / 2) * height for j in range(len(cols))]
        values = [run.cells.get(c.key) or 0.0 for c in cols]
        ax.barh(ys, values, height=height, color=color, label=run.label, xerr=_whiskers(run, values, cols),
                ecolor="#333", capsize=2)
    _reference_marks(ax, [r for r in board.rows if r.kind == "reference"], cols)
    ax.set_yticks(range(len(cols)), [c.label for c in cols])
    ax.invert_yaxis()
    ax.set_xlabel("score")
    ax.set_title(f"{board.benchmark}: score by {'category' if cols[0].key.startswith('cat:') else 'task'}")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _token_bins(run: RunReport) -> dict[str, float]:
    """Mean per-sample score x100 by prompt tokens: a length view for any benchmark."""
    sums: dict[str, list[float]] = {}
    for s in run.samples:
        if s.status not in SETTLED or s.score is None:
            continue
        label = next(lbl for lbl, upper in TOKEN_BINS if (s.prompt_tokens or 0) < upper)
        sums.setdefault(label, []).append(float(s.score))
    return {lbl: 100 * sum(sums[lbl]) / len(sums[lbl]) for lbl, _ in TOKEN_BINS if lbl in sums}


def _nan(values: list[float | None]) -> list[float]:
    return [v if v is not None else float("nan") for v in values]


def _benchmark_bins(ax: Axes, board: Leaderboard, len_cols: list[Column], colors: list[ColorType]) -> bool:
    """The benchmark's own length bins: a line per run (its score type may add to the
    label, e.g. 100-LongBench's LongScore), dashed grey lines for the papers' rows."""
    kind = score_type(board.benchmark)
    xs = list(range(len(len_cols)))
    drawn = False
    for row, color in zip([r for r in board.rows if r.kind == "run"], colors):
        ax.plot(xs, _nan([row.cells.get(c.key) for c in len_cols]), marker="o", color=color,
                label=row.label + kind.length_legend(row.cells))
        drawn = True
    for k, ref in enumerate(r for r in board.rows if r.kind == "reference"):
        ys = [ref.cells.get(c.key) for c in len_cols]
        if any(y is not None for y in ys):
            ax.plot(xs, _nan(ys), linestyle="--", color=REF_COLOR, linewidth=1,
                    label="published (paper)" if k == 0 else None)
    ax.set_xticks(xs, [c.label.lstrip("@") for c in len_cols])
    ax.set_xlabel("context length (benchmark's bins)")
    return drawn


def _prompt_token_bins(ax: Axes, board: Leaderboard, runs: list[RunReport], colors: list[ColorType]) -> bool:
    """Mean per-sample score by prompt-token bin, for benchmarks without length bins."""
    by_id = {r.run_id: r for r in runs}
    labels = [lbl for lbl, _ in TOKEN_BINS]
    drawn = False
    for row, color in zip([r for r in board.rows if r.kind == "run"], colors):
        bins = _token_bins(by_id[row.run_id]) if row.run_id in by_id else {}
        if bins:
            ax.plot([labels.index(b) for b in bins], list(bins.values()), marker="o", color=color, label=row.label)
            drawn = True
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("prompt tokens (mean per-sample score x100; the benchmark has no length bins)")
    return drawn


def length_chart(board: Leaderboard, runs: list[RunReport]) -> bytes:
    """Score versus context length. The benchmark's own bins when it has them (LongBench-E
    0-4k/4-8k/8k+, BAMBOO 4k/16k, 100-LongBench 2k..128k, with LongScore in the legend);
    otherwise mean per-sample score by prompt-token bin, labelled as such."""
    fig = _figure(10, 4)
    ax = fig.add_subplot()
    len_cols = [c for c in board.columns if c.key.startswith("len:")]
    colors = _colors(len(runs))
    drawn = (_benchmark_bins(ax, board, len_cols, colors) if len_cols
             else _prompt_token_bins(ax, board, runs, colors))
    if not drawn:
        _empty(ax, "no scored samples")
    else:
        ax.set_ylabel("score")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax.set_title(f"{board.benchmark}: score versus context length")
    return _png(fig)


def cost_chart(runs: list[RunReport]) -> bytes:
    """USD per task per run, to produce the run: the evaluated model (solid) and the judge
    and prior-knowledge calls (hatched), stacked to the task's total."""
    tasks = list(dict.fromkeys(t.task for r in runs for t in r.tasks))
    fig = _figure(10, max(2.5, 0.3 * len(tasks) * max(1, len(runs)) ** 0.5 + 1.2))
    ax = fig.add_subplot()
    if not tasks:
        _empty(ax, "no samples")
        return _png(fig)
    height = 0.8 / max(1, len(runs))
    for i, (run, color) in enumerate(zip(runs, _colors(len(runs)))):
        stats = {t.task: t for t in run.tasks}
        ys = [j + (i - (len(runs) - 1) / 2) * height for j in range(len(tasks))]
        spent = [stats[t].cost_usd["eval"] if t in stats else 0.0 for t in tasks]
        other = [stats[t].cost_usd["total"] - stats[t].cost_usd["eval"] if t in stats else 0.0 for t in tasks]
        ax.barh(ys, spent, height=height, color=color, label=f"{run.label} model")
        if any(other):
            ax.barh(ys, other, left=spent, height=height, color=color, alpha=0.35, hatch="//",
                    label=f"{run.label} judge + prior")
    ax.set_yticks(range(len(tasks)), tasks)
    ax.invert_yaxis()
    ax.set_xlabel("USD")
    ax.set_title("cost by task")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def latency_chart(runs: list[RunReport]) -> bytes:
    """Distribution of per-request latency per run (fresh requests; cached ones when the
    run sent none), log scale because tails are what matter."""
    fig = _figure(10, max(2.5, 0.6 * len(runs) + 1.5))
    ax = fig.add_subplot()
    data = [[v for t in r.tasks for v in t.latencies_ms] for r in runs]
    if not any(data):
        _empty(ax, "no latencies recorded")
        return _png(fig)
    keep = [(r, d) for r, d in zip(runs, data) if d]
    import inspect

    # `orientation` replaced `vert` in matplotlib 3.10; older releases only know `vert`
    horizontal = ({"orientation": "horizontal"} if "orientation" in inspect.signature(ax.boxplot).parameters
                  else {"vert": False})
    ax.boxplot([d for _, d in keep], whis=(5, 95), showfliers=True, flierprops={"markersize": 2, "alpha": 0.4},
               **horizontal)
    ax.set_yticks(range(1, len(keep) + 1), [r.label for r, _ in keep])
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels on a log axis overlap
    ax.set_xlabel("latency per request, ms (box: p25-p75, whiskers: p5-p95)")
    ax.set_title("latency distribution")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def _binned_medians(pts: list[tuple[int, float]]) -> tuple[list[float], list[float]]:
    """The median of y in about ten equal-count bins of x (the curve through a cloud)."""
    from statistics import median

    pts = sorted(pts)
    k = max(1, min(10, len(pts) // 5))
    xs, ys = [], []
    for i in range(k):
        part = pts[i * len(pts) // k:(i + 1) * len(pts) // k]
        if part:
            xs.append(median(p[0] for p in part))
            ys.append(median(p[1] for p in part))
    return xs, ys


def _cloud(ax: Axes, xy: list[tuple[int, float]], label: str, color: ColorType) -> None:
    """One model's answers as dots and the median of their bins as a line."""
    if not xy:
        return
    ax.scatter([x for x, _ in xy], [y for _, y in xy], s=6, alpha=0.25, color=color)
    mx, my = _binned_medians(xy)
    ax.plot(mx, my, marker="o", markersize=3, color=color, label=label)


def prefill_chart(series: list[tuple[str, list[Point]]]) -> bytes:
    """Time to first token and time per output token against prompt tokens, per model:
    each answer the run sent live as a dot, the median of ten equal-count bins as a line
    (the prefill curve: TTFT grows with the prompt; TPOT shows what a long context costs
    each decoded token). Runs with nothing streamed are left out, said in the title."""
    fig = _figure(11, 4)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    drawn = [(label, pts) for label, pts in series if any(t is not None for _, t, _ in pts)]
    if not drawn:
        _empty(left, "no streamed answers: nothing timed (cache hits and batch results carry no timing)")
        right.set_axis_off()
        return _png(fig)
    spread = [p for _, pts in drawn for p, t, _ in pts if t is not None]
    for (label, pts), color in zip(drawn, _colors(len(drawn))):
        for ax, which in ((left, 1), (right, 2)):
            _cloud(ax, [(p[0], float(v)) for p in pts if (v := p[which]) is not None], label, color)
    for ax, name in ((left, "time to first token, ms"), (right, "time per output token, ms")):
        ax.set_xscale("log" if max(spread) > 10 * max(1, min(spread)) else "linear")
        ax.set_xlabel("prompt tokens")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    left.set_title("TTFT vs prompt tokens (the prefill curve)", fontsize=10)
    right.set_title("TPOT vs prompt tokens", fontsize=10)
    left_out = [label for label, pts in series if (label, pts) not in drawn]
    fig.suptitle("dots: each answer sent live; line: median of ten equal-count bins"
                 + (f"; not streamed, not shown: {', '.join(left_out)}" if left_out else ""), fontsize=8)
    return _png(fig)


def _pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other beats on both (lower x, higher score), by x."""
    out: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if not out or y > out[-1][1]:
            out.append((x, y))
    return out


def frontier_chart(title: str, models: list[tuple[str, float | None, float | None, float | None]]) -> bytes:
    """Score against cost and against p95 time to first token, a point per model
    (label, score, USD to produce the run, p95 TTFT ms), the models no other beats on both
    joined as the frontier a buyer chooses on. A model without a score, a price or a TTFT
    is left out of that panel and named under it."""
    fig = _figure(11, 4)
    axes = (fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2))
    colors = _colors(len(models))
    for ax, at, name in ((axes[0], 2, "USD to produce the run"), (axes[1], 3, "p95 time to first token, ms")):
        shown = [(m, c) for m, c in zip(models, colors) if m[1] is not None and m[at] is not None]
        missing = [m[0] for m in models if m[1] is None or m[at] is None]
        if not shown:
            _empty(ax, f"no model has a score and a {'cost' if at == 2 else 'streamed TTFT'}")
            continue
        for m, color in shown:
            x, y = float(m[at]), float(m[1])  # type: ignore[arg-type]
            ax.scatter([x], [y], s=40, color=color, label=m[0], zorder=3)
            ax.annotate(m[0], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        front = _pareto([(float(m[at]), float(m[1])) for m, _ in shown])  # type: ignore[arg-type]
        if len(front) > 1:
            ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="#555", linestyle=":",
                    linewidth=1, label="frontier")
        ax.set_xlabel(name + (f" (not shown: {', '.join(missing)})" if missing else ""), fontsize=8)
        ax.set_ylabel("score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_title("score vs cost")
    axes[1].set_title("score vs p95 time to first token")
    fig.suptitle(title, fontsize=10)
    return _png(fig)
