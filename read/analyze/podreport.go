package analyze

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
)

// PodReport is one pod of the node as the API shows it, joined to the
// node's findings: what is wrong with it (Symptom, empty when nothing)
// and why (Chain), or what was checked and what is missing.
type PodReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	Phase     string `json:"phase,omitempty"`
	Owner     string `json:"owner,omitempty"`
	// Symptom is what a user sees ("stuck Terminating for 2h05m past
	// its 30s grace period"); Since when it began.
	Symptom string     `json:"symptom,omitempty"`
	Since   *time.Time `json:"since,omitempty"`
	// Explained: a node finding ties to the pod. Chain lists them, most
	// harmful first: pod symptom ← each link.
	Explained bool        `json:"explained"`
	Chain     []ChainLink `json:"chain,omitempty"`
	// Volumes are the pod's claims and the volumes bound to them.
	Volumes []string `json:"volumes,omitempty"`
	// Events are the API's warning events about the pod (newest last).
	Events []string `json:"events,omitempty"`
	// Checked says what was looked at; Missing what the bundle lacks to
	// explain a symptom no finding explains.
	Checked []string `json:"checked"`
	Missing []string `json:"missing,omitempty"`
}

// ChainLink is one finding in a pod's chain.
type ChainLink struct {
	// Finding is the finding's ID, Index its place in Report.Findings
	// (1-based, as the text report numbers them).
	Finding  string     `json:"finding"`
	Index    int        `json:"index"`
	Severity Severity   `json:"severity"`
	Subject  string     `json:"subject,omitempty"`
	Summary  string     `json:"summary"`
	How      string     `json:"how"`
	Evidence []Evidence `json:"evidence,omitempty"`
	Fix      []string   `json:"fix,omitempty"`
}

// maxChainEvidence bounds the evidence a chain link carries (the finding
// has all of it).
const maxChainEvidence = 3

// podReports builds Report.Pods, after the rules and the sort.
func (st *state) podReports() []PodReport {
	views := st.podViews()
	if views == nil {
		return nil
	}
	index := map[*Finding]int{}
	for i := range st.findings {
		index[&st.findings[i]] = i + 1
	}
	out := make([]PodReport, 0, len(views))
	for _, v := range views {
		p := v.pod
		r := PodReport{Namespace: p.Metadata.Namespace, Name: p.Metadata.Name, UID: p.Metadata.UID, Phase: p.Status.Phase, Symptom: v.symptom}
		if p.Metadata.DeletionTimestamp != nil && r.Phase != "" {
			r.Phase += " (Terminating)"
		}
		for _, o := range p.Metadata.OwnerReferences {
			if o.Controller != nil && *o.Controller {
				r.Owner = o.Kind + "/" + o.Name
			}
		}
		if !v.since.IsZero() {
			t := v.since
			r.Since = &t
		}
		for _, pv := range st.pvsOf(p) {
			s := pv.Metadata.Name
			if pv.Spec.CSI != nil {
				s += " (" + pv.Spec.CSI.Driver + " " + pv.Spec.CSI.VolumeHandle + ")"
			}
			r.Volumes = append(r.Volumes, s)
		}
		r.Events = st.podEvents(p)
		for _, f := range st.chainFor(v) {
			link := ChainLink{Finding: f.ID, Index: index[f], Severity: f.Severity, Subject: f.Subject, Summary: f.Summary, Fix: f.Remediation}
			for _, pi := range f.Pods {
				if pi.UID == p.Metadata.UID {
					link.How = pi.How
				}
			}
			link.Evidence = f.Evidence[:min(len(f.Evidence), maxChainEvidence)]
			r.Chain = append(r.Chain, link)
		}
		r.Explained = len(r.Chain) > 0 || v.kind == troubleWaiting
		r.Checked = st.checkedFor(v)
		if v.symptom != "" && !r.Explained {
			r.Missing = st.missingForPods()
		}
		out = append(out, r)
	}
	return out
}

// podEvents are the warning events about a pod, "reason (xN, at): message".
func (st *state) podEvents(p *layout.KubePod) []string {
	var out []string
	for _, e := range st.cluster.Events {
		if e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.UID != p.Metadata.UID || e.Type == "Normal" {
			continue
		}
		s := e.Reason
		if e.Count > 1 {
			s += fmt.Sprintf(" (x%d", e.Count)
		} else {
			s += " ("
		}
		if t := e.Last(); !t.IsZero() {
			if e.Count > 1 {
				s += ", "
			}
			s += "last " + t.UTC().Format(time.RFC3339)
		}
		s += "): " + shorten(e.Message, 300)
		out = append(out, s)
	}
	if len(out) > 10 {
		out = out[len(out)-10:]
	}
	return out
}

// checkedFor says what the analysis looked at for a pod.
func (st *state) checkedFor(v *podView) []string {
	uid := v.pod.Metadata.UID
	var out []string
	if st.mountsSeen {
		n := len(st.mountsUnder("/var/lib/kubelet/pods/" + uid))
		out = append(out, fmt.Sprintf("the node's mount tables: %s under the pod's directory", plural(n, "mount", "mounts")))
	}
	if st.probesSeen {
		out = append(out, "mount probes: none of the pod's mounts is named by a hung-mount or mount-probe-error finding")
	}
	if st.holdersSeen {
		out = append(out, "holders of the pod's volumes' devices and mounts in every mount namespace")
	}
	if st.csi != nil {
		out = append(out, "the CSI inventory (vol_data.json, driver state, mount table)")
	}
	if len(st.kubeDumps) > 0 || len(st.healthz) > 0 {
		out = append(out, "the kubelet's healthz and goroutine dump (its sync loop)")
	}
	out = append(out, "log lines (kubelet, runtime, kernel, CSI drivers) naming the pod's UID or volumes")
	var names []string
	for _, pv := range st.pvsOf(v.pod) {
		names = append(names, pv.Metadata.Name)
	}
	if len(names) > 0 {
		out = append(out, "the pod's volumes: "+listOf(names, 4))
	}
	return out
}

// PodByName finds a pod of the report.
func (r *Report) PodByName(namespace, name string) (*PodReport, bool) {
	for i := range r.Pods {
		if r.Pods[i].Namespace == namespace && r.Pods[i].Name == name {
			return &r.Pods[i], true
		}
	}
	return nil, false
}

// chainText is a pod's chain in one paragraph: symptom ← cause ← ...
func chainText(p PodReport) string {
	parts := []string{p.Namespace + "/" + p.Name + " " + p.Symptom}
	for _, l := range p.Chain {
		parts = append(parts, fmt.Sprintf("[%d] %s", l.Index, l.Summary))
	}
	if !p.Explained {
		parts = append(parts, "no node-side cause found in this bundle; missing: "+strings.Join(p.Missing, "; "))
	}
	return strings.Join(parts, " ← ")
}
