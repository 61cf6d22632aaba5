"""The report's one stylesheet: light and dark (prefers-color-scheme), the Okabe-Ito palette
(colour-blind safe; in dark mode its dark blue and black are lightened to stay readable), system
fonts only (nothing is fetched: the file must open offline and as a mail attachment)."""

CSS = """
:root{color-scheme:light dark;--bg:#ffffff;--fg:#1d2127;--muted:#59626c;--line:#d9dde2;--grid:#e8ebee;
--axis:#8a939d;--zebra:#f4f6f8;--card:#f7f8fa;
--c0:#0072B2;--c1:#E69F00;--c2:#009E73;--c3:#D55E00;--c4:#CC79A7;--c5:#56B4E9;--c6:#C9B800;--c7:#000000;
--ok:#009E73;--bad:#D55E00;--warn:#E69F00;--run:#0072B2;--info:#8a939d;--band:rgba(213,94,0,.16)}
@media (prefers-color-scheme:dark){:root{--bg:#15181c;--fg:#e4e7ea;--muted:#a3acb6;--line:#353b42;
--grid:#262b31;--axis:#6d7781;--zebra:#1b1f24;--card:#1c2026;--c0:#56B4E9;--c5:#3d8fd1;--c6:#F0E442;
--c7:#d9dde2;--run:#3d8fd1;--band:rgba(230,120,60,.22)}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Helvetica Neue",Arial,sans-serif}
main{max-width:1000px;margin:0 auto;padding:20px 20px 40px}
h1{font-size:22px;margin:0 0 2px}h2{font-size:17px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:14px;margin:14px 0 0;font-weight:600}
.sub,.note,.legend{color:var(--muted)}.sub{margin:0 0 12px}
.note{font-size:13px;margin:4px 0 8px}
.badge{display:inline-block;padding:1px 9px;border-radius:10px;font-size:13px;font-weight:600;color:#fff;
vertical-align:3px;margin-left:6px;background:var(--info)}
.badge.st-succeeded{background:var(--ok)}.badge.st-failed{background:var(--bad)}
.badge.st-running{background:var(--run)}.badge.st-interrupted{background:var(--warn);color:#000}
.cause{border-left:4px solid var(--bad);background:var(--card);padding:8px 12px;margin:10px 0}
.cause p{margin:2px 0}.cause ul{margin:4px 0 0 18px;padding:0;color:var(--muted);font-size:13px}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:8px 0}
.facts dt{color:var(--muted)}.facts dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;white-space:nowrap}td.t{white-space:nowrap;font-variant-numeric:tabular-nums}
table.narrow{width:auto;min-width:40%}td.num{text-align:right;font-variant-numeric:tabular-nums}
.sev{font-weight:600}.sev.critical{color:var(--bad)}.sev.warning{color:var(--warn)}.sev.info{color:var(--muted)}
.legend{font-size:12px;margin:2px 0 0 118px;display:flex;flex-wrap:wrap;gap:2px 14px}
.sw{display:inline-block;width:16px;height:0;border-top:3px solid;vertical-align:middle;margin-right:5px}
.sw.dash{border-top-style:dashed}.sw.box{height:10px;border:0;vertical-align:-1px}
.fig{display:block;overflow:visible}
.fig text{font-size:11px;fill:var(--muted);font-family:inherit}
.fig .yl,.fig .unit,.fig .rl{text-anchor:end}.fig .utc{font-style:italic}.fig .unit{font-style:italic}.fig .rl{fill:var(--fg);font-size:12px}
.grid{stroke:var(--grid)}.axis,.tick{stroke:var(--axis)}.zebra{fill:var(--zebra)}
.ln{fill:none;stroke-width:1.7;stroke-linejoin:round;stroke-linecap:round}.ln.dash{stroke-dasharray:6 4}
.band{fill:var(--band)}.mark{stroke-width:1.2;stroke-dasharray:3 3}
.c0{stroke:var(--c0);border-color:var(--c0)}.c1{stroke:var(--c1);border-color:var(--c1)}
.c2{stroke:var(--c2);border-color:var(--c2)}.c3{stroke:var(--c3);border-color:var(--c3)}
.c4{stroke:var(--c4);border-color:var(--c4)}.c5{stroke:var(--c5);border-color:var(--c5)}
.c6{stroke:var(--c6);border-color:var(--c6)}.c7{stroke:var(--c7);border-color:var(--c7)}
circle.dot.c0{fill:var(--c0)}circle.dot.c1{fill:var(--c1)}circle.dot.c2{fill:var(--c2)}circle.dot.c3{fill:var(--c3)}
circle.dot.c4{fill:var(--c4)}circle.dot.c5{fill:var(--c5)}circle.dot.c6{fill:var(--c6)}circle.dot.c7{fill:var(--c7)}
.st-succeeded{fill:var(--ok)}.st-failed{fill:var(--bad)}.st-running{fill:var(--run)}
.st-interrupted{fill:var(--warn)}.st-cancelled,.st-unknown,.st-skipped,.st-pending{fill:var(--info)}
.sev-critical{fill:var(--bad);stroke:var(--bad)}.sev-warning{fill:var(--warn);stroke:var(--warn)}
.sev-info{fill:var(--info);stroke:var(--info)}
.bar.span{fill-opacity:.28;stroke-width:0}.dot{stroke:var(--bg);stroke-width:1}
.fig .bt{fill:var(--fg);font-size:11px}.fig .bt.in{fill:#fff;font-weight:600}
.fig .st-interrupted+.bt.in{fill:#000}
.sw.st-succeeded{background:var(--ok)}.sw.st-failed{background:var(--bad)}.sw.st-running{background:var(--run)}
.sw.st-interrupted{background:var(--warn)}.sw.st-cancelled{background:var(--info)}
.sw.band{background:var(--band)}.sw.sev-critical{background:var(--bad)}.sw.sev-warning{background:var(--warn)}
.sw.sev-info{background:var(--info)}.sw.span{opacity:.35}
footer{margin-top:30px;color:var(--muted);font-size:12px}
"""
