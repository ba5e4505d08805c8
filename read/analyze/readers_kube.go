package analyze

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/internal/jsonstream"
	"github.com/nodesnap/nodesnap/read/goroutinedump"
)

// Readers of the kubelet's and the runtime's own view: healthz, the pod list, CRI pods and containers, goroutine dumps.

// readHealthz reads kubelet/healthz.txt ("[+]ping ok", "[-]syncloop
// failed: reason withheld").
func (st *state) readHealthz(_ string, r io.Reader) error {
	return eachLine(r, func(b []byte, n int, cut bool) error {
		if len(st.healthz) < 200 {
			st.healthz = append(st.healthz, keepLine(n, b, cut))
		}
		if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[-]")) && len(st.healthzBad) < 50 {
			st.healthzBad = append(st.healthzBad, keepLine(n, b, cut))
		}
		return nil
	})
}

// readPods reads kubelet/pods.json (the kubelet's PodList), one pod at a
// time.
func (st *state) readPods(_ string, r io.Reader) error {
	return walkListed(r, "items", func(dec *json.Decoder) error {
		var p struct {
			Metadata struct {
				UID               string  `json:"uid"`
				Name              string  `json:"name"`
				Namespace         string  `json:"namespace"`
				DeletionTimestamp *string `json:"deletionTimestamp"`
			} `json:"metadata"`
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
			Status struct {
				Phase                 string            `json:"phase"`
				ContainerStatuses     []containerStatus `json:"containerStatuses"`
				InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
			} `json:"status"`
		}
		if err := dec.Decode(&p); err != nil {
			return err
		}
		if p.Spec.NodeName != "" && st.podsNode == "" {
			st.podsNode = p.Spec.NodeName
		}
		for _, c := range append(p.Status.ContainerStatuses, p.Status.InitContainerStatuses...) {
			st.addContainer(c.ContainerID, c.Name, p.Metadata.UID)
		}
		if p.Metadata.UID != "" {
			st.pods[p.Metadata.UID] = podRec{UID: p.Metadata.UID, Namespace: p.Metadata.Namespace, Name: p.Metadata.Name,
				Phase: p.Status.Phase, Deleting: p.Metadata.DeletionTimestamp != nil}
		}
		return nil
	}, func() { st.podsSeen = true })
}

// containerStatus is what readPods keeps of a pod's container status.
type containerStatus struct {
	Name        string `json:"name"`
	ContainerID string `json:"containerID"`
}

// maxContainers bounds the container names kept (a node runs hundreds).
const maxContainers = 100000

// addContainer records a container's name; id may carry the runtime's
// scheme ("containerd://<id>", as the kubelet writes it).
func (st *state) addContainer(id, name, podUID string) {
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	if id == "" || len(st.containers) >= maxContainers {
		return
	}
	if old, ok := st.containers[id]; ok && old.Name != "" && name == "" {
		return
	}
	st.containers[id] = containerRec{Name: name, PodUID: podUID}
}

// readCRIContainers reads runtime/<runtime>/cri-containers.json (a CRI
// ListContainers answer in the protobuf JSON mapping), for the names of
// container IDs and their pods.
func (st *state) readCRIContainers(_ string, r io.Reader) error {
	return walkListed(r, "containers", func(dec *json.Decoder) error {
		var c struct {
			ID       string `json:"id"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Labels map[string]string `json:"labels"`
		}
		if err := dec.Decode(&c); err != nil {
			return err
		}
		name := c.Metadata.Name
		if name == "" {
			name = c.Labels["io.kubernetes.container.name"]
		}
		st.addContainer(c.ID, name, c.Labels["io.kubernetes.pod.uid"])
		return nil
	}, nil)
}

// readCRIPods reads runtime/<runtime>/cri-pods.json (a CRI
// ListPodSandbox answer in the protobuf JSON mapping), one sandbox at a
// time, for the names of pod UIDs.
func (st *state) readCRIPods(_ string, r io.Reader) error {
	return walkListed(r, "items", func(dec *json.Decoder) error {
		var p struct {
			Metadata struct {
				UID       string `json:"uid"`
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			State string `json:"state"`
		}
		if err := dec.Decode(&p); err != nil {
			return err
		}
		m := p.Metadata
		// A pod has a new sandbox after each restart of it; a ready
		// one says more than an old one.
		if old, seen := st.runtimePods[m.UID]; m.UID != "" && (!seen || p.State == "SANDBOX_READY" || old.Name == "") {
			st.runtimePods[m.UID] = podRec{UID: m.UID, Namespace: m.Namespace, Name: m.Name}
		}
		return nil
	}, nil)
}

func (st *state) readKubeletGoroutines(name string, r io.Reader) error {
	var count *goroutinedump.Counter
	if st.wantFacts && name == layout.KubeletGoroutineDebug2Path {
		count = goroutinedump.NewCounter(nil)
		st.goroutineCount = count
	}
	d, err := parseGoroutinesCounting(name, r, count)
	if d != nil {
		st.kubeDumps = append(st.kubeDumps, d)
	}
	return err
}

func (st *state) readRuntimeGoroutines(name string, r io.Reader) error {
	d, err := parseGoroutines(name, r)
	if d != nil {
		st.runtimeDump = append(st.runtimeDump, d)
	}
	return err
}

// walkListed reads a JSON object, calls each for every element of its list
// under key, one at a time, skips the rest, and checks nothing follows:
// the shape of the kubelet's PodList and the CRI's list answers. after,
// if not nil, runs once the list was read.
func walkListed(r io.Reader, key string, each func(dec *json.Decoder) error, after func()) error {
	dec := jsonstream.NewDecoder(r)
	err := jsonstream.WalkObject(dec, func(k string) error {
		if k != key {
			return jsonstream.SkipValue(dec)
		}
		return jsonstream.WalkArray(dec, func() error { return each(dec) })
	})
	if err != nil {
		return err
	}
	if after != nil {
		after()
	}
	return jsonstream.EndOfInput(dec)
}

// reBuildInfo is the kubelet's kubernetes_build_info sample's version.
var reBuildInfo = regexp.MustCompile(`^kubernetes_build_info\{[^}]*\bgit_version="(v?\d+\.\d+\.\d+[^"]*)"`)

// readKubeletMetrics reads kubelet/metrics*.txt for the one line analyze
// needs, the running kubelet's version (kubernetes_build_info).
func (st *state) readKubeletMetrics(name string, r io.Reader) error {
	return eachLine(r, func(b []byte, _ int, _ bool) error {
		if !bytes.HasPrefix(b, []byte("kubernetes_build_info{")) {
			return nil
		}
		if m := reBuildInfo.FindSubmatch(b); m != nil && len(m[1]) <= 64 {
			st.buildVersion, st.buildVersionFile = toValidUTF8(m[1]), name
		}
		return nil
	})
}
