"""report.html: the study in one self-contained page (no file or network beside it at
view time), for reading in a browser what report.md lists.

Per split: a table of the variants that sorts by any column (a click on its header,
or ``report.html#sort=KEY`` for every table at once),
the verdicts against the baseline, the per-caption figures of a joined split, the
sentences where each variant differs most from the baseline beside the source, the
reference and both translations, and each variant's cross-attention of the drawn
lines as a heatmap (target pieces down, source pieces across, the mean over layers
and heads, on one scale for every variant) whose cells say their piece pair and
weight under the pointer, with local attention's centres as dots and, on a joined
split, a line where each caption starts; and the study's plots (BLEU by source
length, the dev curves), embedded as images. The figures travel as JSON inside the
page; a script of the page draws them.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from nmt.compare.metrics import shown_in
from nmt.compare.rows import Row, p_text, plain
from nmt.inspection.maps import AttentionMap
from nmt.io.files import write_text


def heatmap(amap: AttentionMap, boundaries: list[int]) -> dict[str, Any]:
    """A drawn line's figures: pieces, the mean weights (T,S) rounded to 4 digits, the
    mean centre per target piece (local attention), the captions' starts."""
    mean = amap.weights.mean((0, 1))  # (T,S)
    centers = None if amap.centers is None else amap.centers.mean((0, 1)).round(2).tolist()
    return {
        "src": amap.src,
        "tgt": amap.tgt,
        "weights": mean.round(4).tolist(),
        "centers": centers,
        "captions": boundaries,
    }


def columns() -> list[tuple[str, str | None, int | None]]:
    """(header, key, digits) of the sortable table: the variant, the metrics shown in
    report.html (nmt.compare.metrics), the verdict (a None key)."""
    shown = [(m.header, m.key, m.digits) for m in shown_in("html")]
    return [("variant", "variant", None), *shown, ("verdict", None, None)]


def row_data(typed: Row) -> dict[str, Any]:
    row = typed.record()
    cells = {key: row.get(key) for _, key, _ in columns() if key is not None}
    cells["p_text"] = "baseline" if row.get("is_baseline") else p_text(row.get("p_value"))
    cells["significant"] = bool(row.get("significant"))
    cells["verdict"] = row.get("verdict", "")
    for key in ("caption_covered", "caption_recall", "differs_most"):
        if key in row:
            cells[key] = row[key]
    return cells


def write_html(
    path: Path,
    title: str,
    splits: tuple[str, ...],
    rows: list[Row],
    maps: dict[str, dict[int, dict[str, Any]]],
    notes: list[str],
    figures: dict[str, list[str]] | None = None,
) -> None:
    """report.html (see the module docstring). ``maps``: per split and drawn line, per
    variant the :func:`heatmap` figures; ``figures``: the plots beside the page (split
    -> file names, ``_all`` the study's own), embedded as images."""
    plots = {
        key: [embedded(path.parent / f) for f in names] for key, names in (figures or {}).items()
    }
    data = {
        "title": title,
        "notes": notes,
        "columns": [list(c) for c in columns()],
        "splits": [
            {
                "name": split,
                "rows": [row_data(r) for r in rows if r.split == split],
                "maps": {str(line): by for line, by in maps.get(split, {}).items()},
                "plots": plots.get(split, []),
            }
            for split in splits
        ],
        "plots": plots.get("_all", []),
    }
    payload = json.dumps(plain(data), ensure_ascii=False, allow_nan=False)
    # No "<" (nor ">", "&") inside the script element: "</script>" would end it and
    # "<!--<script>" puts the HTML parser in a state where the page's own script is
    # swallowed; JSON's \u003c escapes read back as the same text.
    for char in "<>&":
        payload = payload.replace(char, f"\\u{ord(char):04x}")
    page = PAGE.replace("{{title}}", html.escape(title)).replace("{{data}}", payload)
    write_text(path, page)


def embedded(path: Path) -> dict[str, str]:
    """A plot as the page carries it: its name and a data URI of its PNG bytes."""
    return {
        "name": path.name,
        "src": "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode(),
    }


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; }
td:first-child, th:first-child, td.text { text-align: left; }
th.sortable { cursor: pointer; background: #f3f3f3; } th.sorted { background: #dde8f5; }
td.significant { font-weight: bold; }
.note { background: #fff6d6; padding: .4em .6em; }
.maps { display: flex; flex-wrap: wrap; gap: 1em; }
img.plot { max-width: 100%; }
.map { border: 1px solid #ddd; padding: .4em; }
#tip { position: fixed; pointer-events: none; background: #222; color: #fff;
       padding: .2em .4em; font-size: 12px; border-radius: 3px; display: none; }
</style></head>
<body>
<h1 id="title"></h1>
<div id="notes"></div>
<div id="splits"></div>
<div id="tip"></div>
<script id="data" type="application/json">{{data}}</script>
<script>
"use strict";
const data = JSON.parse(document.getElementById("data").textContent);
const tip = document.getElementById("tip");

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function shown(value, digits) {
  if (value === null || value === undefined) return "\u2013";
  if (digits === null || typeof value !== "number") return String(value);
  return value.toFixed(digits);
}

function sortable(table, rows, columns) {
  const body = table.tBodies[0];
  let key = null, ascending = true;
  table.querySelectorAll("th").forEach((th, i) => {
    const column = columns[i];
    if (column[1] === null) return;
    th.classList.add("sortable");
    th.addEventListener("click", () => {
      ascending = key === column[1] ? !ascending : true;
      key = column[1];
      table.querySelectorAll("th").forEach(h => h.classList.remove("sorted"));
      th.classList.add("sorted");
      const order = rows.map((r, j) => [r, body.rows[j]]);
      order.sort((a, b) => {
        const x = a[0][key], y = b[0][key];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * (ascending ? 1 : -1);
      });
      rows.length = 0;
      order.forEach(([r, tr]) => { rows.push(r); body.appendChild(tr); });
    });
  });
}

function variantTable(split) {
  const table = el("table", {class: "variants"});
  const head = table.createTHead().insertRow();
  data.columns.forEach(c => head.appendChild(el("th", {}, c[0])));
  const body = table.createTBody();
  const rows = split.rows.slice();
  rows.forEach(r => {
    const tr = body.insertRow();
    data.columns.forEach(([, key, digits]) => {
      let text = key === null ? r.verdict : shown(r[key], digits);
      if (key === "p_value") text = r.p_text;
      const td = el("td", {}, text);
      if (key === null) td.className = "text";
      if (key === "p_value" && r.significant) td.className = "significant";
      tr.appendChild(td);
    });
  });
  sortable(table, rows, data.columns);
  return table;
}

function captionTable(split) {
  const rows = split.rows.filter(r => r.caption_recall);
  if (!rows.length) return null;
  const table = el("table", {class: "captions"});
  const head = table.createTHead().insertRow();
  head.appendChild(el("th", {}, "variant"));
  rows[0].caption_recall.forEach((_, k) => head.appendChild(el("th", {}, "caption " + (k + 1))));
  const body = table.createTBody();
  rows.forEach(r => {
    const tr = body.insertRow();
    tr.appendChild(el("td", {}, r.variant));
    r.caption_recall.forEach((rec, k) =>
      tr.appendChild(el("td", {}, shown(r.caption_covered[k], 2) + " / " + shown(rec, 1))));
  });
  return table;
}

function differsTable(split) {
  const rows = split.rows.filter(r => r.differs_most && r.differs_most.length);
  if (!rows.length) return null;
  const table = el("table", {class: "differs"});
  const head = table.createTHead().insertRow();
  ["variant", "line", "\u0394 BLEU", "source", "reference", "baseline", "variant's"]
    .forEach(h => head.appendChild(el("th", {}, h)));
  const body = table.createTBody();
  rows.forEach(r => r.differs_most.forEach(d => {
    const tr = body.insertRow();
    [r.variant, d.line, shown(d.delta, 1)].forEach(t => tr.appendChild(el("td", {}, t)));
    [d.src, d.ref, d.baseline, d.hyp].forEach(t => tr.appendChild(el("td", {class: "text"}, t)));
  }));
  return table;
}

function drawMap(figure, scale) {
  const cell = Math.max(4, Math.min(14, Math.floor(640 / Math.max(figure.src.length, 1))));
  const left = 90, top = 90;
  const canvas = el("canvas", {
    width: left + cell * figure.src.length, height: top + cell * figure.tgt.length});
  const ctx = canvas.getContext("2d");
  figure.weights.forEach((row, t) => row.forEach((w, s) => {
    const v = Math.round(255 * (1 - Math.min(w / scale, 1)));
    ctx.fillStyle = "rgb(" + v + "," + v + ",255)";
    ctx.fillRect(left + s * cell, top + t * cell, cell, cell);
  }));
  ctx.fillStyle = "#222";
  ctx.font = Math.min(cell, 11) + "px sans-serif";
  figure.tgt.forEach((p, t) => ctx.fillText(p, 2, top + t * cell + cell - 2, left - 4));
  figure.src.forEach((p, s) => {
    ctx.save();
    ctx.translate(left + s * cell + cell - 2, top - 4);
    ctx.rotate(-Math.PI / 2);
    ctx.fillText(p, 0, 0, top - 8);
    ctx.restore();
  });
  if (figure.centers) {
    ctx.fillStyle = "red";
    figure.centers.forEach((c, t) => {
      ctx.beginPath();
      ctx.arc(left + (c + 0.5) * cell, top + (t + 0.5) * cell, Math.max(cell / 5, 1.5), 0, 7);
      ctx.fill();
    });
  }
  ctx.strokeStyle = "orange";
  figure.captions.forEach(s => {
    ctx.beginPath();
    ctx.moveTo(left + s * cell, top);
    ctx.lineTo(left + s * cell, top + cell * figure.tgt.length);
    ctx.stroke();
  });
  canvas.addEventListener("mousemove", e => {
    const box = canvas.getBoundingClientRect();
    const s = Math.floor((e.clientX - box.left - left) / cell);
    const t = Math.floor((e.clientY - box.top - top) / cell);
    if (t < 0 || s < 0 || t >= figure.tgt.length || s >= figure.src.length) {
      tip.style.display = "none";
      return;
    }
    tip.textContent = figure.tgt[t] + " \u2192 " + figure.src[s] + ": " +
      figure.weights[t][s].toFixed(4);
    tip.style.left = (e.clientX + 12) + "px";
    tip.style.top = (e.clientY + 12) + "px";
    tip.style.display = "block";
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  return canvas;
}

function maps(split) {
  const lines = Object.keys(split.maps);
  if (!lines.length) return [];
  const parts = [];
  lines.forEach(line => {
    const byVariant = split.maps[line];
    let scale = 0;
    Object.values(byVariant).forEach(f => f.weights.forEach(r => r.forEach(w => {
      scale = Math.max(scale, w);
    })));
    parts.push(el("h3", {}, "Line " + line + ": cross-attention while reading the reference " +
      "(the mean over layers and heads; white 0 to blue " + scale.toFixed(2) +
      ", one scale for every variant; red: centres; orange: where a caption starts)"));
    const box = el("div", {class: "maps"});
    Object.entries(byVariant).forEach(([variant, figure]) => {
      const panel = el("div", {class: "map"});
      panel.appendChild(el("div", {}, variant));
      panel.appendChild(drawMap(figure, scale || 1));
      box.appendChild(panel);
    });
    parts.push(box);
  });
  return parts;
}

function plot(p) {
  const figure = el("figure", {});
  figure.appendChild(el("img", {src: p.src, alt: p.name, class: "plot"}));
  figure.appendChild(el("figcaption", {}, p.name));
  return figure;
}

document.getElementById("title").textContent = data.title;
const notes = document.getElementById("notes");
data.notes.forEach(n => notes.appendChild(el("p", {class: "note"}, "Note: " + n + ".")));
const splits = document.getElementById("splits");
data.splits.forEach(split => {
  splits.appendChild(el("h2", {}, split.name));
  splits.appendChild(variantTable(split));
  const captions = captionTable(split);
  if (captions) {
    splits.appendChild(el("p", {}, "Which captions each variant translated: the share of " +
      "each caption's source words receiving at least 0.5 of attention over the output, " +
      "and chrF recall of its reference in the output (0-100)."));
    splits.appendChild(captions);
  }
  const differs = differsTable(split);
  if (differs) {
    splits.appendChild(el("p", {}, "Where each variant differs most from the baseline " +
      "(sentence BLEU, first seeds):"));
    splits.appendChild(differs);
  }
  maps(split).forEach(p => splits.appendChild(p));
  split.plots.forEach(p => splits.appendChild(plot(p)));
});
if (data.plots.length) splits.appendChild(el("h2", {}, "Training"));
data.plots.forEach(p => splits.appendChild(plot(p)));
// a link may name a column to sort every table by: report.html#sort=bleu
const wanted = new URLSearchParams(location.hash.slice(1)).get("sort");
if (wanted) {
  const index = data.columns.findIndex(c => c[1] === wanted);
  document.querySelectorAll("table.variants").forEach(t => {
    if (index >= 0) t.querySelectorAll("th")[index].click();
  });
}
document.body.dataset.ready = "1";
</script>
</body></html>
"""
