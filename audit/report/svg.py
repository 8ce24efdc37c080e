"""A small inline SVG bar chart, drawn here so the report needs no plotting library."""
from __future__ import annotations

from html import escape
from typing import Mapping

WIDTH, HEIGHT = 560, 260
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 56, 16, 24, 48


def _nice_max(v: int) -> int:
    """Smallest 1/2/5 x 10^k >= v, so axis ticks are round numbers."""
    if v <= 0:
        return 1
    scale = 1
    while True:
        for m in (1, 2, 5):
            if m * scale >= v:
                return m * scale
        scale *= 10


def bar_chart(counts: Mapping[int, int], title: str, x_label: str, y_label: str,
              highlight_below: int | None = None) -> str:
    """Vertical bars, one per key (sorted). Bars for keys < highlight_below are drawn in the alarm colour."""
    keys = sorted(int(k) for k in counts)
    t = escape(title)
    if not keys:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}" width="{WIDTH}" height="60">'
                f'<text x="8" y="30">{t}: no data</text></svg>')
    top = _nice_max(max(int(counts[k]) for k in keys))
    plot_w, plot_h = WIDTH - MARGIN_L - MARGIN_R, HEIGHT - MARGIN_T - MARGIN_B
    slot = plot_w / len(keys)
    bar_w = max(slot * 0.7, 1.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}" width="{WIDTH}" '
             f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
             f'<title>{t}</title>']
    for i in range(5):   # horizontal grid lines and y ticks
        v = top * i // 4
        y = MARGIN_T + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{MARGIN_L}" y1="{y:.1f}" x2="{WIDTH - MARGIN_R}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{MARGIN_L - 6}" y="{y + 4:.1f}" text-anchor="end">{v}</text>')
    for i, k in enumerate(keys):
        n = int(counts[k])
        h = plot_h * n / top
        x = MARGIN_L + slot * i + (slot - bar_w) / 2
        y = MARGIN_T + plot_h - h
        colour = "#c0392b" if highlight_below is not None and k < highlight_below else "#2e86c1"
        parts.append(f'<rect class="bar" data-key="{k}" data-count="{n}" x="{x:.1f}" y="{y:.1f}" '
                     f'width="{bar_w:.1f}" height="{h:.1f}" fill="{colour}"><title>{escape(x_label)} {k}: '
                     f'{n}</title></rect>')
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{y - 3:.1f}" text-anchor="middle">{n}</text>')
        parts.append(f'<text x="{x + bar_w / 2:.1f}" y="{MARGIN_T + plot_h + 14:.1f}" '
                     f'text-anchor="middle">{k}</text>')
    parts.append(f'<line x1="{MARGIN_L}" y1="{MARGIN_T + plot_h}" x2="{WIDTH - MARGIN_R}" '
                 f'y2="{MARGIN_T + plot_h}" stroke="#333"/>')
    parts.append(f'<text x="{MARGIN_L + plot_w / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle">'
                 f'{escape(x_label)}</text>')
    parts.append(f'<text transform="translate(14 {MARGIN_T + plot_h / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


SERIES_COLOURS = ("#2e86c1", "#c0392b", "#7d3c98", "#d68910")
LABEL_CHARS = 18      # x labels are cut to this many characters; the full label is in each bar's <title>


def grouped_bar_chart(labels: list[str], series: Mapping[str, list[int]], title: str, y_label: str) -> str:
    """One group of bars per label, one bar per series (in the given order), with a legend. Same frame and
    axis style as bar_chart; bars carry data-label / data-series / data-count for readers and tests."""
    t = escape(title)
    if not labels:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}" width="{WIDTH}" height="60">'
                f'<text x="8" y="30">{t}: no data</text></svg>')
    names = list(series)
    top = _nice_max(max(int(v) for values in series.values() for v in values))
    height = HEIGHT + 40          # room for slanted labels
    plot_w, plot_h = WIDTH - MARGIN_L - MARGIN_R, HEIGHT - MARGIN_T - MARGIN_B
    slot = plot_w / len(labels)
    bar_w = max(slot * 0.8 / len(names), 1.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{t}" width="{WIDTH}" '
             f'height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">',
             f'<title>{t}</title>']
    for i in range(5):
        v = top * i // 4
        y = MARGIN_T + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{MARGIN_L}" y1="{y:.1f}" x2="{WIDTH - MARGIN_R}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{MARGIN_L - 6}" y="{y + 4:.1f}" text-anchor="end">{v}</text>')
    for i, label in enumerate(labels):
        x0 = MARGIN_L + slot * i + slot * 0.1
        for j, name in enumerate(names):
            n = int(series[name][i])
            h = plot_h * n / top
            x, y = x0 + bar_w * j, MARGIN_T + plot_h - h
            parts.append(f'<rect class="bar" data-label="{escape(label)}" data-series="{escape(name)}" '
                         f'data-count="{n}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                         f'fill="{SERIES_COLOURS[j % len(SERIES_COLOURS)]}"><title>{escape(label)}: {escape(name)} '
                         f'{n}</title></rect>')
        short = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "\u2026"
        cx, cy = MARGIN_L + slot * (i + 0.5), MARGIN_T + plot_h + 12
        parts.append(f'<text transform="translate({cx:.1f} {cy:.1f}) rotate(-30)" text-anchor="end">'
                     f'{escape(short)}</text>')
    parts.append(f'<line x1="{MARGIN_L}" y1="{MARGIN_T + plot_h}" x2="{WIDTH - MARGIN_R}" '
                 f'y2="{MARGIN_T + plot_h}" stroke="#333"/>')
    for j, name in enumerate(names):   # legend, top right
        x = WIDTH - MARGIN_R - 110 * (len(names) - j)
        parts.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{SERIES_COLOURS[j % len(SERIES_COLOURS)]}"/>'
                     f'<text x="{x + 14}" y="15">{escape(name)}</text>')
    parts.append(f'<text transform="translate(14 {MARGIN_T + plot_h / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    parts.append("</svg>")
    return "".join(parts)
