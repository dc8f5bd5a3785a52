#!/usr/bin/env python3
"""Draw docs/benchmarks-data.svg: Sluice's fio figures next to the reference.

Reads a TSV file (default docs/benchmarks-data.tsv) with a header and rows

    job  unit  sluice  ref_low  ref_high  target  ext4

where ref_low/ref_high is the range the issue gives for a FUSE file system
of this kind on this machine type, target is the figure Sluice must reach
and ext4 is local ext4 (empty when not measured). Each job gets its own
panel, since MiB/s and IOPS do not share a scale. Writes a self-contained
SVG (no plotting library needed).

    bench/chart.py [TSV] [SVG]
"""
import csv
import sys
from html import escape

COLORS = {"sluice": "#1f77b4", "ref": "#bbbbbb", "ext4": "#2ca02c", "target": "#d62728"}


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    for r in rows:
        for k in ("sluice", "ref_low", "ref_high", "target", "ext4"):
            r[k] = float(r[k]) if r.get(k) else None
    return rows


def panel(r, x0, y0, w, h):
    """Returns the SVG of one job's bars in the box (x0, y0, w, h)."""
    bars = [("Sluice", r["sluice"], COLORS["sluice"]),
            ("reference", r["ref_high"], COLORS["ref"])]
    if r["ext4"]:
        bars.append(("ext4", r["ext4"], COLORS["ext4"]))
    top = max(v for _, v, _ in bars if v) * 1.15
    if r["target"]:
        top = max(top, r["target"] * 1.15)
    out = [f'<text x="{x0 + w / 2}" y="{y0 + 16}" text-anchor="middle" font-weight="bold">'
           f'{escape(r["job"])} ({escape(r["unit"])})</text>']
    base = y0 + h - 22
    plot_h = h - 60
    bw = w / (len(bars) * 1.6)
    for i, (name, v, color) in enumerate(bars):
        x = x0 + bw * 0.4 + i * bw * 1.5
        bh = plot_h * v / top
        if name == "reference" and r["ref_low"]:
            lo = plot_h * r["ref_low"] / top
            out.append(f'<rect x="{x:.1f}" y="{base - bh:.1f}" width="{bw:.1f}" height="{bh - lo:.1f}" '
                       f'fill="{color}" opacity="0.5"/>')
            out.append(f'<rect x="{x:.1f}" y="{base - lo:.1f}" width="{bw:.1f}" height="{lo:.1f}" fill="{color}"/>')
            label = f'{r["ref_low"]:,.0f}–{v:,.0f}'
        else:
            out.append(f'<rect x="{x:.1f}" y="{base - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" fill="{color}"/>')
            label = f"{v:,.0f}"
        out.append(f'<text x="{x + bw / 2:.1f}" y="{base - bh - 4:.1f}" text-anchor="middle" font-size="11">{label}</text>')
        out.append(f'<text x="{x + bw / 2:.1f}" y="{base + 14:.1f}" text-anchor="middle" font-size="11">{name}</text>')
    if r["target"]:
        ty = base - plot_h * r["target"] / top
        out.append(f'<line x1="{x0 + 4}" x2="{x0 + w - 4}" y1="{ty:.1f}" y2="{ty:.1f}" stroke="{COLORS["target"]}" '
                   f'stroke-dasharray="5,3"/>')
        out.append(f'<text x="{x0 + w - 4}" y="{ty - 3:.1f}" text-anchor="end" font-size="10" '
                   f'fill="{COLORS["target"]}">target {r["target"]:,.0f}</text>')
    out.append(f'<line x1="{x0}" x2="{x0 + w}" y1="{base}" y2="{base}" stroke="#333"/>')
    return "\n".join(out)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "docs/benchmarks-data.tsv"
    dst = sys.argv[2] if len(sys.argv) > 2 else "docs/benchmarks-data.svg"
    rows = load(src)
    cols, pw, ph = 3, 260, 230
    n_rows = (len(rows) + cols - 1) // cols
    width, height = cols * pw + 20, n_rows * ph + 50
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">'
             'Sluice data path through FUSE (fio, 1 GiB files; dashed: target)</text>']
    for i, r in enumerate(rows):
        parts.append(panel(r, 10 + (i % cols) * pw, 40 + (i // cols) * ph, pw - 20, ph - 10))
    parts.append("</svg>")
    with open(dst, "w") as f:
        f.write("\n".join(parts) + "\n")


if __name__ == "__main__":
    main()
