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
