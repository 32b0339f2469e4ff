"""Table and plot of bench/from_scratch/run.py results (docs/from-scratch.md).

    python bench/from_scratch/report.py DIR [DIR ...] [--svg-dir docs/images]

(docs/from-scratch.md's tables and plots: DIR = bench/from_scratch/results/vit and
bench/from_scratch/results/lm, the rows of the sweep that ran.)

Prints, per results.json, a Markdown table (mean and sample standard deviation over
seeds of the metric, parameters, mean training seconds a row) and writes
from-scratch-TASK.svg: the metric against D_k for both kinds of attention, the mean
as a line and each seed as a dot. Needs only the standard library.
"""

import argparse
import json
import math
import statistics
from pathlib import Path

COLORS = {"concat": "#1f77b4", "collab": "#d62728"}


def groups(rows):
    out = {}
    for r in rows:
        out.setdefault((r["attention"], r["dk"]), []).append(r)
    return out


def table(result) -> str:
    rows = result["rows"]
    metric = rows[0]["metric"]
    lines = [f"| attention | D_k | seeds | {metric} mean | std | params | train s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (kind, dk), rs in sorted(groups(rows).items(), key=lambda kv: (kv[0][0] != "concat", -kv[0][1])):
        v = [r["value"] for r in rs]
        std = f"{statistics.stdev(v):.4f}" if len(v) > 1 else "–"
        lines.append(f"| {kind} | {dk} | {len(v)} | {statistics.mean(v):.4f} | {std} | {rs[0]['params']:,} | "
                     f"{statistics.mean(r['seconds'] for r in rs):.0f} |")
    return "\n".join(lines)


def svg(result) -> str:
    """Metric against log2 D_k: one polyline of means and one dot per seed per kind."""
    rows = result["rows"]
    w, h, left, right, top, bottom = 420, 280, 60, 100, 20, 40
    dks = sorted({r["dk"] for r in rows})
    values = [r["value"] for r in rows]
    lo, hi = min(values), max(values)
    pad = 0.1 * (hi - lo or abs(hi) or 1)
    lo, hi = lo - pad, hi + pad
    x = lambda dk: left + (w - left - right) * (  # noqa: E731
        (math.log2(dk) - math.log2(dks[0])) / ((math.log2(dks[-1]) - math.log2(dks[0])) or 1))
    y = lambda v: top + (h - top - bottom) * (hi - v) / (hi - lo)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" '
           f'font-size="11"><rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>']
    for dk in dks:
        out.append(f'<text x="{x(dk):.1f}" y="{h - bottom + 15}" text-anchor="middle">{dk}</text>')
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        out.append(f'<text x="{left - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.3f}</text>')
    out.append(f'<text x="{(left + w - right) / 2}" y="{h - 5}" text-anchor="middle">D_k (shared query/key '
               f'width)</text>')
    out.append(f'<text x="12" y="{top + (h - top - bottom) / 2}" transform="rotate(-90 12 '
               f'{top + (h - top - bottom) / 2})" text-anchor="middle">{rows[0]["metric"]}</text>')
    for i, (kind, color) in enumerate(COLORS.items()):
        g = {dk: [r["value"] for r in rs] for (k, dk), rs in groups(rows).items() if k == kind}
        pts = " ".join(f"{x(dk):.1f},{y(statistics.mean(g[dk])):.1f}" for dk in sorted(g))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for dk, vs in g.items():
            out += [f'<circle cx="{x(dk):.1f}" cy="{y(v):.1f}" r="2.5" fill="{color}"/>' for v in vs]
        out.append(f'<text x="{w - right + 10}" y="{top + 15 + 15 * i}" fill="{color}">{kind}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--svg-dir", type=Path, default=None)
    args = ap.parse_args()
    for d in args.dirs:
        result = json.loads((d / "results.json").read_text())
        print(f"## {result['task']}\n\n{table(result)}\n")
        if args.svg_dir is not None:
            args.svg_dir.mkdir(parents=True, exist_ok=True)
            (args.svg_dir / f"from-scratch-{result['task']}.svg").write_text(svg(result))


if __name__ == "__main__":
    main()
