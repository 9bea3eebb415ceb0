#!/usr/bin/env python3
"""Prints the rows Benchmarks/run.sh collected as one Markdown table (or JSON), and rewrites the generated part of
docs/PERFORMANCE.md.

Usage: Benchmarks/report.py RESULTS.jsonl MACHINE.json [--json] [--write docs/PERFORMANCE.md]

The generated part of the document lies between the two marker lines below; everything outside them (what limits each
figure, profiles, history) is written by hand and kept.
"""

import argparse
import json
import sys

BEGIN = "<!-- BEGIN Benchmarks/run.sh: generated, do not edit by hand -->"
END = "<!-- END Benchmarks/run.sh -->"


def number(value, unit=""):
    if value is None:
        return "-"
    if abs(value) >= 1000:
        text = f"{value:,.0f}"
    elif abs(value) >= 100:
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def target_text(row):
    target = row.get("target") or {}
    unit = row["unit"]
    if "min_ratio" in target:
        return f">= {target['min_ratio']}x"
    if "max_ratio" in target:
        return f"<= {target['max_ratio']}x ref"
    if "min_value" in target:
        return f">= {number(target['min_value'], unit)}"
    if "max_value" in target:
        return f"<= {number(target['max_value'], unit)}"
    if "between" in target:
        low, high = target["between"]
        return f"{number(low)} to {number(high, unit)}"
    return "-"


def verdict(row):
    if row.get("met") is None:
        return "-"
    return "met" if row["met"] else "**not met**"


def table(rows):
    lines = [
        "| benchmark | figure | Stowage | reference | reference figure | ratio | target | verdict | peak RSS MiB |",
        "|---|---|---:|---|---:|---:|---|---|---:|",
    ]
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if row.get("ratio") is not None else "-"
        peak = number(row.get("peak_rss_mib"))
        figure = row["figure"] + (f" ({row['note']})" if row.get("note") else "")
        lines.append(
            f"| {row['benchmark']} | {figure} | {number(row['ours'], row['unit'])} | {row.get('reference') or '-'} | "
            f"{number(row.get('reference_value'), row['unit'])} | {ratio} | {target_text(row)} | {verdict(row)} | {peak} |"
        )
    return "\n".join(lines)


def machine_text(machine):
    start, end = machine.get("load_start", []), machine.get("load_end", [])
    fmt = lambda load: " ".join(f"{v:.2f}" for v in load) if load else "?"
    return (
        f"Run {machine.get('date', '?')} ({machine.get('mode', '?')} mode, commit {machine.get('commit', '?')}, "
        f"{machine.get('seconds', 0):.0f} s): {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
        f"{machine.get('memory_gib', 0):.0f} GiB; load average {fmt(start)} at the start, {fmt(end)} at the end. "
        "Every reference ran in the same run on the same input; ratios compare figures of one run only."
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results")
    parser.add_argument("machine")
    parser.add_argument("--json", action="store_true", help="print JSON (machine and rows) instead of Markdown")
    parser.add_argument("--write", help="rewrite the generated part of this Markdown file")
    args = parser.parse_args()
    with open(args.results) as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    with open(args.machine) as handle:
        machine = json.load(handle)
    if args.json:
        print(json.dumps({"machine": machine, "rows": rows}, indent=2))
    else:
        print(machine_text(machine))
        print()
        print(table(rows))
    if args.write:
        generated = f"{BEGIN}\n\n{machine_text(machine)}\n\n{table(rows)}\n\n{END}"
        try:
            with open(args.write) as handle:
                document = handle.read()
        except FileNotFoundError:
            document = "# Performance\n\n"
        if BEGIN in document and END in document:
            head, rest = document.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            document = head + generated + tail
        else:
            document = document.rstrip("\n") + "\n\n" + generated + "\n"
        with open(args.write, "w") as handle:
            handle.write(document)
        print(f"\nwrote {args.write}", file=sys.stderr)
    missed = [row for row in rows if row.get("met") is False]
    if missed:
        print(f"\n{len(missed)} of {sum(1 for r in rows if r.get('met') is not None)} targets not met "
              "(a benchmark never fails on a timing; see docs/PERFORMANCE.md for why each falls short)", file=sys.stderr)


if __name__ == "__main__":
    main()
