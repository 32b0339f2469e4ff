"""Markdown tables of one or more results.json of bench/real_task/run.py, and the plot
(accuracy against R, one line per method and pass) when matplotlib is installed.

    python bench/real_task/report.py OUT/results.json [--transfer NAME=OTHER/results.json ...] [--plot PNG]
"""

import argparse
import json
from pathlib import Path


def points(x):
    return f"{100 * x:.1f}"


def interval(pair):
    return f"[{pair[0]:+.1f}, {pair[1]:+.1f}]"


def main_table(result: dict) -> str:
    o = result["original"]
    lines = [
        "| method | R | second pass | accuracy (95 % interval) | drop (points) | 95 % interval of the difference | "
        "drop from the control (95 % interval) | Q/K params | total params | compression s (CPU s) | "
        "second pass s (CPU s) | best dev step / steps |",
        "| --- | ---: | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
        f"| original | - | - | {points(o['accuracy'])} ({o['accuracy_interval'][0]:.1f}-"
        f"{o['accuracy_interval'][1]:.1f}) | - | - | - | {o['qk_params']:,} | {o['total_params']:,} | - | "
        f"{o['fine_tune_seconds']:.0f} ({o['fine_tune_cpu_seconds']:.0f}) fine-tuning | - |",
    ]
    c = o.get("second_pass")
    if c:
        lines.append(
            f"| original (control) | - | yes | {points(c['accuracy'])} ({c['accuracy_interval'][0]:.1f}-"
            f"{c['accuracy_interval'][1]:.1f}) | {-100 * (c['accuracy'] - o['accuracy']):+.1f} | "
            f"{interval(c['difference_interval'])} | - | {o['qk_params']:,} | {o['total_params']:,} | - | "
            f"{c['fine_tune_seconds']:.0f} ({c['fine_tune_cpu_seconds']:.0f}) | {c['best_step']} / {c['steps']} |")
    for r in result["rows"]:
        lo, hi = r["accuracy_interval"]
        steps = f"{r['best_step']} / {r['steps']}" if r["second_pass"] else "-"
        tuned = f"{r['fine_tune_seconds']:.0f} ({r['fine_tune_cpu_seconds']:.0f})" if r["second_pass"] else "-"
        control = (f"{r['drop_from_control_points']:+.1f} {interval(r['control_difference_interval'])}"
                   if "drop_from_control_points" in r else "-")
        lines.append(
            f"| {r['method']} | {r['shared_dim']} | {'yes' if r['second_pass'] else 'no'} | {points(r['accuracy'])} "
            f"({lo:.1f}-{hi:.1f}) | {r['drop_points']:+.1f} | {interval(r['difference_interval'])} | {control} | "
            f"{r['qk_params']:,} | {r['total_params']:,} | {r['compression_seconds']:.1f} "
            f"({r['compression_cpu_seconds']:.1f}) | {tuned} | {steps} |")
    return "\n".join(lines)


def transfer_table(named: dict) -> str:
    """Accuracy per file (columns) for the original and every saved model (rows)."""
    names = list(named)
    header = "| model | " + " | ".join(f"{n} ({named[n]['data']['sentences']})" for n in names) + " |"
    lines = [header, "| --- |" + " ---: |" * len(names)]
    lines.append("| original | " + " | ".join(points(named[n]["original"]["accuracy"]) for n in names) + " |")
    first = named[names[0]]["rows"]
    for i, r in enumerate(first):
        cells = []
        for n in names:
            s = named[n]["rows"][i]
            cells.append(f"{points(s['accuracy'])} ({-s['drop_points']:+.1f} {interval(s['difference_interval'])})")
        label = f"{r['method']} R={r['shared_dim']}{' + second pass' if r['second_pass'] else ''}"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    lines = {}
    for r in result["rows"]:
        key = r["method"] + (" + second pass" if r["second_pass"] else "")
        lines.setdefault(key, []).append((r["shared_dim"], 100 * r["accuracy"], r["accuracy_interval"]))
    for k, (key, pts) in enumerate(sorted(lines.items())):
        pts.sort()
        xs = [p[0] + 2.5 * (k - (len(lines) - 1) / 2) for p in pts]  # side by side, not on top
        ys = [p[1] for p in pts]
        err = [[y - p[2][0] for y, p in zip(ys, pts)], [p[2][1] - y for y, p in zip(ys, pts)]]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=key)
    ax.axhline(100 * result["original"]["accuracy"], color="black", linestyle="--", label="original")
    if "second_pass" in result["original"]:
        ax.axhline(100 * result["original"]["second_pass"]["accuracy"], color="gray", linestyle=":",
                   label="original + second pass (control)")
    ax.set_xticks(sorted({r["shared_dim"] for r in result["rows"]}))
    ax.set_xlabel("shared dimension R")
    ax.set_ylabel(f"test accuracy (%), {result['data']['test']} sentences")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--transfer", nargs="*", default=[], help="NAME=results.json of --eval-only runs")
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args()
    result = json.loads(args.results.read_text())
    print(main_table(result))
    if args.transfer:
        named = {}
        for item in args.transfer:
            name, _, path = item.partition("=")
            named[name] = json.loads(Path(path).read_text())
        print()
        print(transfer_table(named))
    if args.plot:
        plot(result, args.plot)


if __name__ == "__main__":
    main()
