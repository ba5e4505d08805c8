package report

import (
	"html/template"
	"strconv"
	"sync"
)

// pageTemplate is the whole page. html/template escapes every value by
// its context (text, attribute, URL); nothing from the bundle is ever
// marked safe. The only URLs are "#anchor" links within the page.
// It is parsed on first use, not in every process of the binary at start
// (2.5 ms and 190 KB).
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.Must(template.Must(template.New("page").Funcs(template.FuncMap{
		"f": func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	}).Parse(pageHTML)).Parse(diffHTML)).Parse(fleetHTML))
})

// styleCSS is the one style sheet of every page (report, diff, fleet).
const styleCSS = `{{define "style"}}:root { --bad:#b3261e; --warn:#b26a00; --info:#1f5fa8; --ok:#2e7d32; --muted:#5f6368; --line:#dadce0; --bg:#f8f9fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color:#202124; margin:0; background:#fff; }
header { background:#202124; color:#fff; padding:18px 28px; }
header h1 { margin:0; font-size:22px; font-weight:600; }
header .sub { color:#bdc1c6; margin-top:4px; overflow-wrap:anywhere; }
main { padding:8px 28px 40px; max-width:1200px; }
h2 { font-size:18px; margin:28px 0 10px; padding-bottom:4px; border-bottom:1px solid var(--line); }
h3 { font-size:15px; margin:0; }
code, pre, .mono { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size:12.5px; }
pre { background:var(--bg); border:1px solid var(--line); padding:8px 10px; overflow-x:auto; white-space:pre-wrap; overflow-wrap:anywhere; margin:6px 0; }
table { border-collapse:collapse; width:100%; margin:6px 0; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { background:var(--bg); font-weight:600; }
th.num { text-align:right; }
td.num { text-align:right; white-space:nowrap; }
.glance { display:grid; grid-template-columns: max-content 1fr; gap:2px 16px; margin:12px 0; }
.glance dt { color:var(--muted); }
.glance dd { margin:0; overflow-wrap:anywhere; }
.counts span { display:inline-block; padding:2px 10px; border-radius:12px; margin-right:6px; font-weight:600; color:#fff; }
.c-critical { background:var(--bad); } .c-warning { background:var(--warn); } .c-info { background:var(--info); } .c-none { background:var(--ok); }
.finding { border:1px solid var(--line); border-left:6px solid var(--info); border-radius:4px; padding:10px 14px; margin:12px 0; }
.finding.sev-critical { border-left-color:var(--bad); } .finding.sev-warning { border-left-color:var(--warn); }
.badge { display:inline-block; font-size:11px; font-weight:700; text-transform:uppercase; padding:1px 7px; border-radius:3px; color:#fff; background:var(--info); margin-right:6px; }
.sev-critical .badge { background:var(--bad); } .sev-warning .badge { background:var(--warn); }
.fid { color:var(--muted); }
.subject { color:var(--muted); overflow-wrap:anywhere; }
.summary { font-weight:500; margin:6px 0; }
.expl { white-space:pre-wrap; }
.ev { margin:6px 0 6px 4px; }
.ev .path { font-weight:600; overflow-wrap:anywhere; }
.lines { background:var(--bg); border:1px solid var(--line); padding:4px 0; margin:4px 0; overflow-x:auto; }
.lines div { white-space:pre-wrap; overflow-wrap:anywhere; padding:0 10px; }
.lines .n { color:var(--muted); display:inline-block; min-width:5em; text-align:right; padding-right:1em; user-select:none; }
.lines .dec { color:#0b6e4f; padding-left:6em; }
.fix li { margin:3px 0; white-space:pre-wrap; }
.muted, .cut { color:var(--muted); }
.cut { font-style:italic; }
.st-ok { color:var(--ok); } .st-warn { color:var(--warn); } .st-bad { color:var(--bad); font-weight:600; } .st-other { color:var(--muted); }
svg { max-width:100%; height:auto; font-family: system-ui, "DejaVu Sans", sans-serif; }
svg .lane { fill:#f1f3f4; }
svg .ev { fill-opacity:.8; stroke:#fff; stroke-width:1; } svg .ev-critical { fill:var(--bad); } svg .ev-warning { fill:var(--warn); } svg .ev-info { fill:var(--info); }
svg .lbl { font-size:12px; fill:#202124; dominant-baseline:middle; }
svg .note { font-size:11px; fill:var(--muted); dominant-baseline:middle; }
svg .axis { stroke:#9aa0a6; stroke-width:1; }
svg .mark { stroke:var(--info); stroke-width:1.5; stroke-dasharray:4 3; }
svg rect.st-ok { fill:var(--ok); } svg rect.st-warn { fill:var(--warn); } svg rect.st-bad { fill:var(--bad); } svg rect.st-other { fill:#9aa0a6; }
svg .head { font-size:12px; font-weight:600; fill:var(--muted); dominant-baseline:middle; }
svg rect.node { stroke-width:1.2; rx:4px; ry:4px; }
svg rect.dev { fill:#e8f0fe; stroke:var(--info); } svg rect.held { fill:#fce8e6; stroke:var(--bad); }
svg rect.ns { fill:#fef7e0; stroke:var(--warn); } svg rect.hostns { fill:#f1f3f4; stroke:#9aa0a6; }
svg rect.proc { fill:#fff; stroke:#5f6368; } svg rect.pod { fill:#e6f4ea; stroke:var(--ok); } svg rect.nopod { fill:#fff; stroke:#dadce0; stroke-dasharray:3 2; }
svg .gt { font-size:11.5px; fill:#202124; dominant-baseline:middle; } svg .gt.b { font-weight:600; }
svg .edge { stroke:#80868b; stroke-width:1.3; fill:none; }
svg .limit { stroke:var(--bad); stroke-width:1.5; stroke-dasharray:5 3; }
svg rect.st-info { fill:var(--info); }
svg rect.old { fill:#bdc1c6; }
td.mark-add, td.mark-del, td.mark-chg { width:1.5em; }
.mark-add { color:var(--ok); font-weight:700; } .mark-del { color:var(--bad); font-weight:700; } .mark-chg { color:var(--warn); font-weight:700; }
.verdict { font-weight:600; padding:8px 12px; border-radius:4px; background:var(--bg); border-left:6px solid var(--ok); }
.verdict.worse { border-left-color:var(--bad); }
td.sev-critical { background:#fce8e6; color:var(--bad); font-weight:600; text-align:center; } td.sev-warning { background:#fef7e0; color:var(--warn); font-weight:600; text-align:center; }
td.sev-info { background:#e8f0fe; color:var(--info); text-align:center; } td.sev-none { color:var(--line); text-align:center; }
.scroll { overflow-x:auto; }
nav a { margin-right:14px; }
details > summary { cursor:pointer; color:var(--info); }
{{end}}`

// headHTML opens every page: its policy (no script, nothing fetched)
// and its styles; the value is the title.
const headHTML = `{{define "head"}}<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="nodesnap">
<title>{{.}}</title>
<style>
{{template "style"}}</style>
</head>
{{end}}`

const pageHTML = styleCSS + headHTML + `{{template "head" .Title}}<body>
<header>
<h1>{{.Host}}{{if .Worst}} — {{.Worst}}{{end}}</h1>
<div class="sub">nodesnap report of {{.Bundle}}</div>
</header>
<main>
<nav><a href="#glance">At a glance</a><a href="#findings">Findings</a>{{if .Timeline}}<a href="#timeline">Timeline</a>{{end}}{{if .Hung}}<a href="#hung">Hung</a>{{end}}{{if .HasFacts}}<a href="#holders">Held devices</a><a href="#dirs">Directories</a><a href="#goroutines">Goroutines</a>{{end}}{{if not .NoManifest}}<a href="#collectors">Collectors</a><a href="#files">Files</a>{{end}}</nav>

<h2 id="glance">The node at a glance</h2>
<p class="counts">{{if .Findings}}<span class="c-critical">{{index .Counts "critical"}} critical</span><span class="c-warning">{{index .Counts "warning"}} warning</span><span class="c-info">{{index .Counts "info"}} info</span>{{else}}<span class="c-none">no findings</span>{{end}}</p>
<dl class="glance">
<dt>host</dt><dd>{{.Host}}</dd>
{{if .Kernel}}<dt>kernel</dt><dd>{{.Kernel}}</dd>{{end}}
{{if .BootID}}<dt>boot id</dt><dd class="mono">{{.BootID}}</dd>{{end}}
<dt>collected</dt><dd>{{.CollectedAt}}{{if .Duration}} in {{.Duration}}{{end}} by nodesnap {{.Tool}}</dd>
<dt>collection</dt><dd>{{.Status}}{{if .Interrupted}} ({{.Interrupted}}){{end}}</dd>
{{if .Self}}<dt>nodesnap itself</dt><dd>{{.Self}} (never counted as evidence)</dd>{{end}}
{{if .Redactions}}<dt>redactions</dt><dd>{{.Redactions}}</dd>{{end}}
<dt>read</dt><dd>{{.FilesRead}} archive entries (manifest.json included), {{.BytesRead}}</dd>
</dl>
{{range .Warnings}}<p class="st-warn">warning: {{.}}</p>{{end}}
{{if .NoManifest}}<p class="muted">The manifest was not available: collectors, files and hung mounts are not shown.</p>{{end}}
{{if .Missing}}
<h3>Evidence missing, and why</h3>
<table><tr><th>collector</th><th>status</th><th>why</th></tr>
{{range .Missing}}<tr><td>{{.Collector}}</td><td>{{.Status}}</td><td>{{if .Error}}<pre>{{.Error}}</pre>{{end}}{{range .Notes}}<div class="muted">{{.}}</div>{{end}}</td></tr>
{{end}}</table>
{{end}}
{{if .Remedies}}
<h3>To collect what is missing next time</h3>
{{range .Remedies}}<p><b>{{.Collector}}</b>: missing {{.Missing}}: {{.Reason}}</p>
<pre>{{range .Fix}}{{.}}
{{end}}</pre>
{{end}}
{{end}}
{{if .Omitted}}
<details><summary>{{len .Omitted}} file(s) deliberately left out of the bundle</summary>
<table><tr><th>path</th><th>reason</th></tr>{{range .Omitted}}<tr><td class="mono">{{.Path}}</td><td>{{.Reason}}</td></tr>{{end}}</table>
{{if .MoreOmit}}<p class="cut">… and {{.MoreOmit}} more, not listed here (nodesnap inspect lists them).</p>{{end}}
</details>
{{end}}

<h2 id="findings">Findings</h2>
{{if not .Findings}}<p>No findings: the bundle shows none of the storage incidents nodesnap knows.</p>{{end}}
{{if .Findings}}<table><tr><th>#</th><th>severity</th><th>id</th><th>title</th></tr>
{{range .Findings}}<tr><td><a href="#{{.Anchor}}">{{.N}}</a></td><td>{{.Severity}}</td><td class="mono">{{.ID}}</td><td>{{.Title}}</td></tr>
{{end}}</table>{{end}}
{{if .Pods}}<h3 id="pods">Pods in trouble</h3>
<p>The API's view of the node (the cluster collector) joined to the findings: each pod's symptom, then what causes it.</p>
<ul>{{range .Pods}}<li><span class="mono">{{.Name}}</span> {{.Symptom}}{{range .Chain}} ← <a href="#{{.Anchor}}">[{{.N}}]</a> {{.Summary}} <em>({{.How}})</em>{{end}}{{if .Unexplained}} ← <strong>no node-side cause found in this bundle</strong>; missing: {{.Unexplained}}{{end}}</li>
{{end}}</ul>{{end}}
{{if .BudgetCut}}<p class="cut">This page quotes at most about 1 MiB of the bundle's text: {{.BudgetCut}} lines, records or stacks are cut short below (nodesnap analyze --json has them whole).</p>{{end}}
{{if .MoreFindings}}<p class="cut">… and {{.MoreFindings}} more findings of lower severity, not shown here (nodesnap analyze --json lists every one).</p>{{end}}
{{range .Findings}}
<section class="finding sev-{{.Severity}}" id="{{.Anchor}}" data-finding-id="{{.ID}}">
<h3><span class="badge">{{.Severity}}</span>{{.N}}. {{.Title}} <span class="fid mono">{{.ID}}</span></h3>
{{if .Subject}}<div class="subject mono">{{.Subject}}</div>{{end}}
<p class="summary">{{.Summary}}</p>
{{if .Explanation}}<p class="expl">{{.Explanation}}</p>{{end}}
{{if .Evidence}}<details open><summary>Evidence ({{len .Evidence}})</summary>
{{range .Evidence}}<div class="ev">
<div>{{if .FileRef}}<a class="path mono" href="#{{.FileRef}}">{{.Path}}</a>{{else}}<span class="path mono">{{.Path}}</span>{{end}}{{if .What}} — {{.What}}{{end}}</div>
{{if .Lines}}<div class="lines mono">{{range .Lines}}<div><span class="n">{{.N}}</span>{{.Text}}{{if .Truncated}} <span class="cut">…</span>{{end}}</div>{{if .Decoded}}<div class="dec">decoded: {{.Decoded}}</div>{{end}}{{end}}</div>{{end}}
{{if .MoreCut}}<p class="cut">… {{.MoreCut}} more lines not shown here.</p>{{end}}
{{if .Record}}<pre>{{.Record}}</pre>{{if .RecordCt}}<p class="cut">record cut; nodesnap analyze --json has all of it.</p>{{end}}{{end}}
{{if .More}}<p class="cut">… and {{.More}} more matching lines or records in the bundle.</p>{{end}}
</div>{{end}}
{{if .MoreEvid}}<p class="cut">… and {{.MoreEvid}} more pieces of evidence, not shown here.</p>{{end}}
</details>{{end}}
{{if .Remediation}}<h3>Fix</h3><ol class="fix">{{range .Remediation}}<li>{{.}}</li>{{end}}</ol>{{end}}
</section>
{{end}}

<h2 id="timeline">Timeline of log signatures</h2>
{{with .Timeline}}{{template "chart" .}}{{end}}
<p class="muted">{{.TimelineNote}}</p>

{{if not .NoManifest}}
<h2 id="hung">Hung mounts and collectors</h2>
{{if not .Hung}}<p>Nothing hung during collection.</p>{{end}}
{{range .Hung}}<div class="ev">
<div><b>{{if .Target}}<span class="mono">{{.Target}}</span>{{else}}{{.Op}}{{end}}</b>{{if .Target}} <span class="muted">({{.Op}}, found by {{.Collector}})</span>{{end}}{{if .Unreaped}} <span class="st-bad">could not be reaped after SIGKILL</span>{{end}}</div>
{{if .Note}}<div class="muted">{{.Note}}</div>{{end}}
{{range .Tasks}}<div class="muted mono">{{.Label}}</div>{{if .Stack}}<pre>{{range .Stack}}{{.}}
{{end}}{{if .MoreFrm}}… {{.MoreFrm}} more frames{{end}}</pre>{{end}}{{end}}
</div>{{end}}
{{if .MoreHung}}<p class="cut">… and {{.MoreHung}} more, not shown here (nodesnap inspect lists them).</p>{{end}}
{{end}}
{{if .HasFacts}}
<h2 id="holders">Held devices</h2>
{{with .HolderGraph}}<p class="muted">Who holds each device an unmount on the host cannot free: the mount namespaces that mount it or hold a file on it, their processes, and the pods those run in. Hover a box for all of it.</p>
{{template "chart" .}}<p class="muted">Red: a device mounted only outside the host's mount namespace, which an unmount on the host cannot free. Yellow: another mount namespace; grey: the host's. Green: a pod.</p>{{else}}<p>No device is held outside the host's mount namespace, nor its device node held open.</p>{{end}}
{{if .HolderMore}}<p class="cut">… and {{.HolderMore}} more held devices, not drawn here (nodesnap analyze --json lists them in the findings).</p>{{end}}

<h2 id="dirs">Directory shape</h2>
{{with .DirsChart}}{{template "chart" .}}{{end}}
<p class="muted">{{if .DirsNote}}{{.DirsNote}}{{else}}The bundle holds no dirshape record.{{end}}</p>
{{with .DeletingChart}}{{template "chart" .}}{{end}}
{{if .DeletingNote}}<p class="muted">{{.DeletingNote}}</p>{{end}}

<h2 id="goroutines">The kubelet's goroutines</h2>
{{with .GoroutineChart}}{{template "chart" .}}{{end}}
<p class="muted">{{if .GoroutineNote}}{{.GoroutineNote}}{{else}}The bundle holds no goroutine dump of the kubelet (debug=2).{{end}}</p>
{{end}}
{{if not .NoManifest}}

<h2 id="collectors">Collectors</h2>
{{with .CollectorChart}}{{template "chart" .}}{{end}}
<table><tr><th>collector</th><th>status</th><th class="num">duration</th><th class="num">deadline</th><th class="num">files</th><th class="num">size</th><th class="num">peak RSS</th><th>detail</th></tr>
{{range .Collectors}}<tr><td>{{.Name}}</td><td class="st-{{.Class}}">{{.Status}}</td><td class="num">{{.Duration}}</td><td class="num">{{.Timeout}}</td><td class="num">{{.Files}}</td><td class="num">{{.Size}}</td><td class="num">{{.MaxRSS}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>

<h2 id="files">Files in the bundle</h2>
<details><summary>{{.TotalFiles}} files{{if .MoreFiles}}, the first {{len .Files}} listed{{end}}</summary>
<table><tr><th>path</th><th class="num">size</th><th>kind</th><th class="num">redactions</th><th>flags</th></tr>
{{range .Files}}<tr id="{{.Ref}}"><td class="mono">{{.Path}}</td><td class="num">{{.Size}}</td><td>{{.Kind}}</td><td class="num">{{.Redaction}}</td><td>{{.Flags}}</td></tr>
{{end}}</table>
{{if .MoreFiles}}<p class="cut">… and {{.MoreFiles}} more files, not listed here (nodesnap inspect --files lists every one).</p>{{end}}
</details>
{{end}}
<p class="muted">Written by nodesnap from the bundle alone. This page runs no script and loads nothing from the network.</p>
</main>
</body>
</html>
{{define "chart"}}<svg role="img" aria-label="{{.Label}}" width="{{f .W}}" height="{{f .H}}" viewBox="0 0 {{f .W}} {{f .H}}">
{{range .Rects}}<rect x="{{f .X}}" y="{{f .Y}}" width="{{f .W}}" height="{{f .H}}" class="{{.Class}}">{{if .Title}}<title>{{.Title}}</title>{{end}}</rect>
{{end}}{{range .Lines}}<line x1="{{f .X1}}" y1="{{f .Y1}}" x2="{{f .X2}}" y2="{{f .Y2}}" class="{{.Class}}"/>
{{end}}{{range .Dots}}<circle cx="{{f .X}}" cy="{{f .Y}}" r="{{f .R}}" class="{{.Class}}"><title>{{.Title}}</title></circle>
{{end}}{{range .Texts}}<text x="{{f .X}}" y="{{f .Y}}" text-anchor="{{.Anchor}}" class="{{.Class}}">{{.Text}}</text>
{{end}}</svg>{{end}}`

// diffHTML is the page of nodesnap diff --html.
const diffHTML = `{{define "diff"}}{{template "head" .Title}}<body>
<header>
<h1>{{(index .Sides 1).Host}}: what changed</h1>
<div class="sub">nodesnap diff of {{(index .Sides 0).Bundle}} and {{(index .Sides 1).Bundle}}</div>
</header>
<main>
<nav>{{range .Sections}}<a href="#{{.ID}}">{{.Title}}</a>{{end}}</nav>
<h2 id="d-bundles">The two bundles</h2>
<table><tr><th></th><th>bundle</th><th>host</th><th>collected</th><th>status</th><th>findings</th><th>kernel</th><th>kubelet</th><th>runtimes</th></tr>
{{range .Sides}}<tr><th>{{.Which}}</th><td class="mono">{{.Bundle}}</td><td>{{.Host}}</td><td>{{.Collected}}</td><td>{{.Status}}</td><td>{{.Findings}}</td><td>{{.Kernel}}</td><td>{{.Kubelet}}</td><td>{{.Runtimes}}</td></tr>
{{end}}</table>
{{range .Warnings}}<p class="st-warn">warning: {{.}}</p>{{end}}
<p class="verdict{{if .Worse}} worse{{end}}">{{if .Worse}}Worse: a warning or critical finding appeared, or a finding rose to one (nodesnap diff exits 3).{{else}}No new warning or critical finding.{{end}}</p>
{{if not .Changed}}<p>Nothing noteworthy changed.</p>{{end}}
{{if .BudgetCut}}<p class="cut">This page quotes at most about 1 MiB of the bundles' text: {{.BudgetCut}} names are cut short below (nodesnap diff -o json has them whole).</p>{{end}}
{{range .Sections}}
<h2 id="{{.ID}}">{{.Title}}</h2>
{{with .Chart}}{{template "chart" .}}{{end}}
{{if .Rows}}<table><tr><th></th>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td class="{{.Class}}">{{.Mark}}</td>{{range .Cells}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .More}}<p class="cut">… and {{.More}} more, not listed here (nodesnap diff --json lists every one).</p>{{end}}
{{if .Note}}<p class="muted">{{.Note}}</p>{{end}}
{{end}}
{{if .Notes}}<h2 id="d-notes">Not compared</h2>{{range .Notes}}<p class="muted">{{.}}</p>{{end}}{{end}}
<p class="muted">Written by nodesnap from the two bundles alone. This page runs no script and loads nothing from the network.</p>
</main>
</body>
</html>
{{end}}`
