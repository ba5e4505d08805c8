package report

// fleetHTML is the page of nodesnap report DIR: a directory of bundles.
const fleetHTML = `{{define "fleet"}}{{template "head" .Title}}<body>
<header>
<h1>Fleet: {{.Nodes}} node{{if ne .Nodes 1}}s{{end}}, {{.Sick}} with a warning or critical finding</h1>
<div class="sub">nodesnap report of the bundles in {{.Dir}}</div>
</header>
<main>
<nav><a href="#f-findings">Findings by node</a>{{if .Diffs}}<a href="#f-differ">Nodes that differ</a>{{end}}{{if .Runs}}<a href="#f-collection">Collection</a>{{end}}<a href="#f-nodes">Nodes</a>{{if .Unreadable}}<a href="#f-unreadable">Unreadable</a>{{end}}</nav>
{{if .RunsBad}}<p class="st-bad">{{.RunsBad}} node(s) of the collection have no good bundle or only a partial one: <a href="#f-collection">see why</a>.</p>{{end}}
{{if .Unreadable}}<p class="st-bad">{{len .Unreadable}} bundle(s) could not be read: <a href="#f-unreadable">see below</a>.</p>{{end}}
<h2 id="f-findings">Findings by node</h2>
{{if not .Columns}}<p>No node has a finding.</p>{{end}}
{{with .Chart}}{{template "chart" .}}{{end}}
{{if .Columns}}<div class="scroll"><table>
<tr><th>node</th><th>worst</th>{{range .Columns}}<th class="mono" title="{{.Title}}">{{.ID}}<div class="muted">{{.Nodes}} node{{if ne .Nodes 1}}s{{end}}</div></th>{{end}}</tr>
{{range .Rows}}<tr><td><a href="#{{.Anchor}}">{{.Host}}</a></td><td>{{.Worst}}</td>{{range .Cells}}<td class="{{.Class}}">{{.Text}}</td>{{end}}</tr>
{{end}}</table></div>
{{if .MoreCols}}<p class="cut">… and {{.MoreCols}} more kinds of finding, in the nodes' sections below.</p>{{end}}{{end}}
{{if .Diffs}}<h2 id="f-differ">Nodes that differ from the rest</h2>
<p class="muted">Findings fewer than half of the nodes have, findings most nodes have and a node lacks, another kernel or bundle status than most.</p>
<table><tr><th>node</th><th>only some nodes have</th><th>lacks (most nodes have it)</th><th>other</th></tr>
{{range .Diffs}}<tr><td>{{if .Anchor}}<a href="#{{.Anchor}}">{{.Node}}</a>{{else}}{{.Node}}{{end}}</td><td class="mono">{{range $i, $s := .Has}}{{if $i}}, {{end}}{{$s}}{{end}}</td><td class="mono">{{range $i, $s := .Lacks}}{{if $i}}, {{end}}{{$s}}{{end}}</td><td>{{range $i, $s := .Other}}{{if $i}}; {{end}}{{$s}}{{end}}</td></tr>
{{end}}</table>
{{if .MoreDiffs}}<p class="cut">… and {{.MoreDiffs}} more nodes that differ (nodesnap fleet analyze lists them all).</p>{{end}}{{end}}
{{if .Runs}}<h2 id="f-collection">Collection (fleet.json)</h2>
<p class="muted">What nodesnap fleet collect recorded per node; nodes without a good bundle first.</p>
<table><tr><th>node</th><th>status</th><th>reason</th><th>bundle</th><th>time</th></tr>
{{range .Runs}}<tr><td>{{if .Anchor}}<a href="#{{.Anchor}}">{{.Node}}</a>{{else}}{{.Node}}{{end}}</td><td class="{{.Class}}">{{.Status}}</td><td>{{.Reason}}</td><td class="mono">{{.Bundle}}</td><td>{{.Seconds}}</td></tr>
{{end}}</table>
{{if .MoreRuns}}<p class="cut">… and {{.MoreRuns}} more nodes (fleet.json has them all).</p>{{end}}{{end}}
<h2 id="f-nodes">Nodes</h2>
{{if not .Sections}}<p>No bundle could be analysed.</p>{{end}}
{{if .BudgetCut}}<p class="cut">This page quotes at most about 1 MiB of the bundles' text: {{.BudgetCut}} summaries are cut short below (nodesnap report BUNDLE has them whole).</p>{{end}}
{{range .Sections}}<section class="finding sev-{{.Worst}}" id="{{.Anchor}}">
<h3>{{.Host}}</h3>
<div class="subject mono">{{.Bundle}}</div>
<p class="muted">collected {{.Collected}} · {{.Status}}{{if .Kernel}} · kernel {{.Kernel}}{{end}} · {{index .Counts "critical"}} critical, {{index .Counts "warning"}} warning, {{index .Counts "info"}} info</p>
{{if .Findings}}<table><tr><th>severity</th><th>id</th><th>subject</th><th>summary</th></tr>
{{range .Findings}}<tr><td class="sev-{{.Severity}}">{{.Severity}}</td><td class="mono">{{.ID}}</td><td class="mono">{{.Subject}}</td><td>{{.Summary}}</td></tr>
{{end}}</table>{{else}}<p>No findings.</p>{{end}}
{{if .More}}<p class="cut">… and {{.More}} more findings (the table above has every kind).</p>{{end}}
<p class="muted">The evidence, explanations and fixes: nodesnap report {{.Bundle}}</p>
</section>
{{end}}
{{if .Unreadable}}<h2 id="f-unreadable">Bundles that could not be read</h2>
<table><tr><th>node</th><th>bundle</th><th>why</th></tr>{{range .Unreadable}}<tr><td>{{.Node}}</td><td class="mono">{{.Path}}</td><td>{{.Err}}</td></tr>{{end}}</table>{{end}}
<p class="muted">Written by nodesnap from the bundles alone. This page runs no script and loads nothing from the network.</p>
</main>
</body>
</html>
{{end}}`
