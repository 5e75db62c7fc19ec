"""The compile report's CSS (a standalone palette, or VS Code's theme in the webview) and the
webview's one script (a click on a location asks the extension to open it)."""

STANDALONE_PALETTE = """
:root { --bg: #ffffff; --fg: #1f2328; --muted: #59636e; --border: #d1d9e0; --code-bg: #f6f8fa;
  --link: #0969da; --good: #1a7f37; --bad: #cf222e; --warn: #9a6700;
  --c-eager: #d4731b; --c-compiled: #2f6fdb; --c1: #2f6fdb; --c2: #8250df; --c3: #1a7f37; --c4: #d4731b;
  --c-total: #8c959f; --font: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; --size: 14px; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --border: #3d444d; --code-bg: #151b23;
    --link: #4493f8; --good: #3fb950; --bad: #f85149; --warn: #d29922;
    --c-eager: #f0883e; --c-compiled: #4493f8; --c1: #4493f8; --c2: #ab7df8; --c3: #3fb950; --c4: #f0883e;
    --c-total: #6e7681; } }
"""

WEBVIEW_PALETTE = """
:root { --bg: var(--vscode-editor-background); --fg: var(--vscode-editor-foreground);
  --muted: var(--vscode-descriptionForeground); --border: var(--vscode-panel-border, var(--vscode-widget-border, rgba(128,128,128,.35)));
  --code-bg: var(--vscode-textCodeBlock-background); --link: var(--vscode-textLink-foreground);
  --good: var(--vscode-charts-green); --bad: var(--vscode-errorForeground); --warn: var(--vscode-editorWarning-foreground);
  --c-eager: var(--vscode-charts-orange); --c-compiled: var(--vscode-charts-blue); --c1: var(--vscode-charts-blue);
  --c2: var(--vscode-charts-purple); --c3: var(--vscode-charts-green); --c4: var(--vscode-charts-orange);
  --c-total: var(--vscode-disabledForeground, #888); --font: var(--vscode-font-family);
  --mono: var(--vscode-editor-font-family); --size: var(--vscode-font-size); }
"""

STYLE = """
* { box-sizing: border-box; }
body { margin: 0; padding: 20px 28px 40px; background: var(--bg); color: var(--fg); font-family: var(--font);
  font-size: var(--size); line-height: 1.45; }
h1 { font-size: 1.5em; margin: 0 0 4px; font-weight: 600; }
h2 { font-size: 1.2em; margin: 28px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--border); font-weight: 600; }
h3 { font-size: 1.05em; margin: 16px 0 6px; font-weight: 600; }
a { color: var(--link); text-decoration: none; } a:hover { text-decoration: underline; }
code, .loc { font-family: var(--mono); font-size: 0.92em; }
code { background: var(--code-bg); padding: 1px 4px; border-radius: 3px; }
.meta { color: var(--muted); margin: 0 0 4px; }
.summary { margin: 10px 0 0; display: flex; flex-wrap: wrap; gap: 8px; }
.pill { border: 1px solid var(--border); border-radius: 12px; padding: 2px 10px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 6px 10px; border-bottom: 1px solid var(--border); }
th { font-weight: 600; color: var(--muted); font-size: 0.85em; vertical-align: bottom; }
table.targets th { max-width: 9em; }
table.targets tr.target td { border-bottom: none; padding-bottom: 2px; }
table.targets tr.verdict td { padding-top: 0; font-weight: 600; }
@media (max-width: 640px) {  /* the editor's side panel: stack each target's cells, nothing runs past the edge */
  table.targets tr.head { display: none; }
  table.targets, table.targets tbody, table.targets tr, table.targets td { display: block; width: auto; }
  table.targets td { padding: 2px 10px; border: none; overflow-wrap: anywhere; }
  table.targets td:not(.name)[data-label]::before { content: attr(data-label) ": "; color: var(--muted); font-size: 0.85em; }
  table.targets td:empty { display: none; }
  table.targets tr.verdict { border-bottom: 1px solid var(--border); padding-bottom: 6px; }
  td { overflow-wrap: anywhere; }
}
tr.verdict .label { font-weight: normal; color: var(--muted); font-size: 0.85em; margin-right: 6px; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.name { white-space: nowrap; }
.sub { color: var(--muted); font-weight: normal; font-size: 0.9em; }
.muted { color: var(--muted); } .good { color: var(--good); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.card { border: 1px solid var(--border); border-radius: 6px; padding: 4px 16px 10px; margin: 12px 0; }
.charts { display: flex; flex-wrap: wrap; gap: 16px 32px; }
figure { margin: 6px 0; flex: 1 1 440px; max-width: 600px; }
figure.empty { display: flex; align-items: center; }
figcaption { color: var(--muted); font-size: 0.85em; margin-top: 2px; }
svg.chart { width: 100%; height: auto; display: block; font-family: var(--font); }
svg .title { font-size: 13px; font-weight: 600; fill: var(--fg); }
svg .axis { font-size: 11px; fill: var(--muted); } svg .strong { font-weight: 700; fill: var(--fg); }
svg .grid { stroke: var(--border); stroke-width: 1; }
svg .line { fill: none; stroke-width: 2; }
svg .whisker { stroke-width: 1.5; opacity: 0.6; }
svg .s-eager { stroke: var(--c-eager); fill: var(--c-eager); } svg polyline.s-eager { fill: none; }
svg .s-compiled { stroke: var(--c-compiled); fill: var(--c-compiled); } svg polyline.s-compiled { fill: none; }
svg .bar { stroke: none; }
svg .c1 { fill: var(--c1); } svg .c2 { fill: var(--c2); } svg .c3 { fill: var(--c3); } svg .c4 { fill: var(--c4); }
svg .c-total { fill: var(--c-total); }
svg .marker { stroke-dasharray: 4 3; }
table.trial { width: auto; } table.trial td:first-child { white-space: nowrap; }
ul.breaks { list-style: none; padding: 0; margin: 0; }
li.break { border-left: 3px solid var(--warn); padding: 4px 12px; margin: 8px 0; }
li.break .head { display: flex; flex-wrap: wrap; gap: 4px 10px; align-items: baseline; }
li.break p { margin: 4px 0; }
.gb { font-family: var(--mono); font-weight: 700; }
ul.hints { margin: 4px 0; padding-left: 20px; color: var(--muted); }
.chain { color: var(--muted); font-size: 0.9em; }
.banner { border: 1px solid var(--warn); border-radius: 4px; padding: 6px 12px; margin: 12px 0 0; }
footer { margin-top: 32px; color: var(--muted); font-size: 0.85em; }
"""

SCRIPT = """
(function () {
  const vscode = acquireVsCodeApi();
  // opened from a hover card's Details link: at that target's details
  const focus = document.body.dataset.focus && document.getElementById(document.body.dataset.focus);
  if (focus) { focus.scrollIntoView(); }
  document.addEventListener('click', (event) => {
    const link = event.target.closest('[data-path]');
    if (!link) { return; }
    event.preventDefault();
    vscode.postMessage({ type: 'open', path: link.dataset.path,
      line: Number(link.dataset.line) || 1, column: Number(link.dataset.column) || 1 });
  });
})();
"""
