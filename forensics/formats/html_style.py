"""The incident page's style sheet and legend: light, dark (`prefers-color-scheme`) and print.

Colours are CSS variables the SVG shapes use by class (`formats/svg.py`); every verdict has a
colour and, for print in grey, markers differ by dash pattern too. Text wraps anywhere, so no
line runs out of a narrow screen.
"""

from __future__ import annotations

CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;
--track:#f3f5f7;--affected:#cf222e;--suspected:#bc4c00;--failed:#818b98;--ok:#1a7f37;
--running:#0969da;--signal:#a40e26;--success:#8250df;--checkpoint:#0969da;--gap:#cf222e;
--retried:#818b98;--relaunches:#1a7f37;--signals:#a40e26;--silent:#cf222e}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--line:#3d444d;--track:#151b23;--affected:#ff7b72;--suspected:#ffa657;--failed:#6e7681;
--ok:#3fb950;--running:#58a6ff;--signal:#ff7b72;--success:#d2a8ff;--checkpoint:#79c0ff;
--gap:#f85149;--retried:#9198a1;--relaunches:#3fb950;--signals:#ff7b72;--silent:#ffa198}}
@media print{:root{--bg:#fff;--fg:#000;--muted:#333;--line:#999;--track:#f2f2f2;
--affected:#b00;--suspected:#c60;--failed:#888;--ok:#080;--running:#05a;--signal:#700;
--success:#60c;--checkpoint:#05a;--gap:#b00}section,article,.row{break-inside:avoid}
a{color:inherit}}
*{box-sizing:border-box}
html{background:var(--bg);color:var(--fg)}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;
background:var(--bg);color:var(--fg)}
main{max-width:1100px;margin:0 auto;padding:12px 16px 40px}
h1{font-size:1.45rem;margin:.4em 0}h2{font-size:1.2rem;margin:1.4em 0 .4em;
border-bottom:1px solid var(--line)}h3{font-size:1rem;margin:1em 0 .3em}
p,li,dd,dt,td,th,h1,h2,h3,code,pre,a,span,b{overflow-wrap:anywhere;word-break:break-word}
a{color:var(--running)}
code,pre{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;background:var(--track);padding:8px;border:1px solid var(--line)}
table{border-collapse:collapse;margin:.3em 0;max-width:100%}
th,td{border:1px solid var(--line);padding:2px 8px;text-align:left;vertical-align:top}
td{font-variant-numeric:tabular-nums;white-space:nowrap}
@media (max-width:600px){.axis .mid{display:none}body{font-size:14px}main{padding:8px 10px 30px}}
svg{display:block;width:100%}
svg.lane{height:14px}svg.hourly{height:44px}
.track{fill:var(--track)}
.bar.affected{fill:var(--affected)}.bar.suspected{fill:var(--suspected)}
.bar.failed{fill:var(--failed)}.bar.ok{fill:var(--ok)}.bar.running{fill:var(--running)}
.bar.gap{fill:var(--gap)}.bar.read{fill:var(--ok);opacity:.35}
.count.signals{fill:var(--signals)}.count.silent{fill:var(--silent)}
.count.retried{fill:var(--retried)}.count.relaunches{fill:var(--relaunches)}
.marker{stroke-width:3px;vector-effect:non-scaling-stroke}
.marker.signal{stroke:var(--signal)}
.marker.false-success{stroke:var(--success);stroke-dasharray:3 2}
.marker.checkpoint{stroke:var(--checkpoint);stroke-dasharray:1 2}
.marker.disruption{stroke:var(--signal);stroke-dasharray:8 3}
.axis{display:flex;flex-wrap:wrap;justify-content:space-between;gap:4px;
color:var(--muted);font-size:12px}
.row{margin:2px 0 6px}.row .label{margin:0;font-size:12px;color:var(--muted)}
.series p{margin:.5em 0 2px}
.finding{border:1px solid var(--line);border-left:6px solid var(--affected);padding:4px 10px;
margin:10px 0}.finding.suspected{border-left-color:var(--suspected)}
.finding dl{display:grid;grid-template-columns:minmax(6em,max-content) 1fr;gap:2px 12px;
margin:4px 0}.finding dt{color:var(--muted)}.finding dd{margin:0;min-width:0}
.verdict{text-transform:uppercase;font-size:12px;padding:1px 6px;border-radius:3px;
color:var(--bg);background:var(--affected)}.verdict.suspected{background:var(--suspected)}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:var(--muted)}
.swatch{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
.swatch.affected{background:var(--affected)}.swatch.suspected{background:var(--suspected)}
.swatch.failed{background:var(--failed)}.swatch.ok{background:var(--ok)}
.swatch.running{background:var(--running)}.swatch.signals,.swatch.signal{background:var(--signal)}
.swatch.silent{background:var(--silent)}.swatch.retried{background:var(--retried)}
.swatch.relaunches{background:var(--relaunches)}.swatch.false-success{background:var(--success)}
.swatch.checkpoint{background:var(--checkpoint)}.swatch.disruption{background:var(--signal)}
.swatch.mark{width:3px;height:14px;vertical-align:-2px}
.warn{color:var(--affected)}
.events{list-style:none;padding:0}.events li{border-bottom:1px solid var(--line);padding:2px 0}
.events .meta{color:var(--muted);font-size:12px;margin-right:8px}
"""

LEGEND = (
    '<p class="legend">'
    '<span><span class="swatch affected"></span>affected (silent success)</span>'
    '<span><span class="swatch suspected"></span>suspected</span>'
    '<span><span class="swatch failed"></span>failed (retried as it should)</span>'
    '<span><span class="swatch ok"></span>succeeded</span>'
    '<span><span class="swatch running"></span>running</span>'
    '<span><span class="swatch mark signal"></span>death signal (solid line)</span>'
    '<span><span class="swatch mark false-success"></span>false SUCCESS (dashed)</span>'
    '<span><span class="swatch mark checkpoint"></span>checkpoint write (dotted)</span>'
    '<span><span class="swatch mark disruption"></span>Kubernetes disruption event (long dashes)'
    "</span>"
    "</p>"
)
