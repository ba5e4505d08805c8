package corpusgen

import (
	"encoding/json"
	"fmt"
)

// Context is one place on a node where text ends up, as a collection
// writes it.
type Context struct {
	Name string
	// Line renders text as that place holds it; n keeps lines apart.
	Line func(text string, n int) string
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Contexts are the node places of the generated corpus: a config file's
// line, a journal line as the journal collector writes it, a container's
// CRI log line, a process list line, the kubelet's /pods (an argument and
// an env value whose name says nothing) and /configz.
var Contexts = []Context{
	{"file", func(t string, n int) string { return t }},
	{"journal", func(t string, n int) string {
		return fmt.Sprintf("2026-11-28T08:%02d:%02d+0000 node-a agent[4242]: sync failed, retrying with %s", n/60%60, n%60, t)
	}},
	{"cri", func(t string, n int) string {
		return fmt.Sprintf("2026-11-28T08:00:%02d.%09dZ stderr F %s", n%60, n, t)
	}},
	{"argv", func(t string, n int) string {
		return fmt.Sprintf("root      %5d     1  0 08:00 ?        00:00:00 /usr/local/bin/agent --verbose %s", 4000+n, t)
	}},
	{"pods-arg", func(t string, n int) string {
		return `          "args": ["--v=2", ` + jsonString(t) + `],`
	}},
	{"pods-env", func(t string, n int) string {
		return `{"name":"AGENT_OPTS","value":` + jsonString(t) + `}`
	}},
	{"configz", func(t string, n int) string {
		return `{"kubeletconfig":{"staticPodURL":"https://10.0.0.1/pods","providerArgs":[` + jsonString(t) + `]}}`
	}},
}
