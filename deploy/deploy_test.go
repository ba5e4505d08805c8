// Package deploy_test checks the deployment files (Kubernetes manifests,
// systemd units) and the command lines in docs/ against the real types and
// the real binary, so they cannot drift from what nodesnap accepts.
package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/nodesnap/nodesnap/test/testkit"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8sjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { testkit.Main(m) }

const (
	deployDir           = "."
	imagePlaceholder    = "NODESNAP_IMAGE"
	nodeNamePlaceholder = "NODE_NAME"
)

// k8sObjects decodes every document of every manifest in deploy/kubernetes
// strictly (an unknown, misspelt or duplicated field fails) into its
// k8s.io/api type.
func k8sObjects(t *testing.T) map[string][]any {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	byKind := map[string][]any{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if meta.Kind == "" {
				if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")) != "" {
					t.Errorf("%s document %d has no kind", f, i)
				}
				continue
			}
			var obj any
			switch meta.APIVersion + " " + meta.Kind {
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "v1 ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "rbac.authorization.k8s.io/v1 ClusterRole":
				obj = &rbacv1.ClusterRole{}
			case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
				obj = &rbacv1.ClusterRoleBinding{}
			case "apps/v1 DaemonSet":
				obj = &appsv1.DaemonSet{}
			case "batch/v1 Job":
				obj = &batchv1.Job{}
			default:
				t.Errorf("%s document %d: unexpected %s %s", f, i, meta.APIVersion, meta.Kind)
				continue
			}
			// The API server's own strictness: yaml.UnmarshalStrict
			// goes through encoding/json, which matches field names
			// regardless of case (hostPid would pass for hostPID).
			js, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Errorf("%s document %d (%s): %v", f, i, meta.Kind, err)
				continue
			}
			strict, err := k8sjson.UnmarshalStrict(js, obj)
			if err == nil && len(strict) > 0 {
				err = errors.Join(strict...)
			}
			if err != nil {
				t.Errorf("%s document %d (%s): %v", f, i, meta.Kind, err)
				continue
			}
			byKind[meta.Kind] = append(byKind[meta.Kind], obj)
		}
	}
	return byKind
}

// The Kubernetes manifests are valid objects and say what nodesnap needs:
// privileged, the host's PID and network namespaces, the host's root at
// /host read-only, bundles to a hostPath, every taint tolerated, limits on
// every container, one image placeholder, a service account allowed to ask
// the kubelet, and a nodesnap command line that the real flag parser takes.
func TestKubernetesManifests(t *testing.T) {
	objs := k8sObjects(t)
	for _, kind := range []string{"Namespace", "DaemonSet", "Job"} {
		if len(objs[kind]) != 1 {
			t.Fatalf("%d %s objects, want 1", len(objs[kind]), kind)
		}
	}
	// The kubelet collector's role and binding, its pprof opt-in's, and
	// the cluster collector's (nodesnap-cluster, checked in
	// TestManifestsEqualPodspec).
	// rbac-pprof.yaml binds its account to the read role and to nodes/proxy.
	for kind, want := range map[string]int{"ClusterRole": 3, "ClusterRoleBinding": 4} {
		if len(objs[kind]) != want {
			t.Fatalf("%d %s objects, want %d (nodesnap, nodesnap-pprof and nodesnap-cluster)", len(objs[kind]), kind, want)
		}
	}
	ns := objs["Namespace"][0].(*corev1.Namespace)
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s does not let Pod Security Admission admit privileged pods", ns.Name)
	}
	rb := rbacOf(t, objs)
	sa := rb.sa["nodesnap"]
	if sa == nil || sa.Namespace != ns.Name {
		t.Fatalf("no service account nodesnap in namespace %s", ns.Name)
	}
	// The pods' identity has the least-privilege role: read endpoints of
	// the kubelet, never nodes/proxy (exec into pods).
	allowed := rb.allowed("nodesnap")
	for _, want := range []string{"nodes/pods", "nodes/healthz", "nodes/configz", "nodes/metrics", "nodes/stats"} {
		if !allowed[want+" get"] {
			t.Errorf("service account nodesnap lacks get on %s (the kubelet collector): %v", want, allowed)
		}
	}
	if allowed["nodes/proxy get"] {
		t.Error("service account nodesnap may get nodes/proxy, which allows exec into every pod: that is rbac-pprof.yaml's opt-in")
	}
	// The opt-in has nodes/proxy and the least-privilege rest.
	pp := rb.allowed("nodesnap-pprof")
	if !pp["nodes/proxy get"] || !pp["nodes/pods get"] || !pp["nodes/metrics get"] {
		t.Errorf("service account nodesnap-pprof (rbac-pprof.yaml) lacks nodes/proxy or the read subresources: %v", pp)
	}
	// Every role only reads; nodes/proxy only in a file whose name and
	// comment say it is an opt-in with its risk.
	for file, roles := range rb.rolesByFile {
		for _, role := range roles {
			for _, r := range role.Rules {
				for _, v := range r.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("%s: role %s grants %s on %v: nodesnap only reads", file, role.Name, v, r.Resources)
					}
				}
				if slices.Contains(r.Resources, "nodes/proxy") || slices.Contains(r.Resources, "*") {
					raw, _ := os.ReadFile(file)
					if !strings.Contains(file, "pprof") || !strings.Contains(string(raw), "RISK") || !strings.Contains(string(raw), "exec") {
						t.Errorf("%s: role %s grants nodes/proxy outside the pprof opt-in, or without its risk written beside it", file, role.Name)
					}
				}
			}
		}
		if raw, _ := os.ReadFile(file); strings.Contains(strings.ToLower(string(raw)), "read-only: get only") {
			t.Errorf("%s calls its role read-only", file)
		}
	}

	ds := objs["DaemonSet"][0].(*appsv1.DaemonSet)
	job := objs["Job"][0].(*batchv1.Job)
	for _, c := range []struct {
		what string
		ns   string
		spec *corev1.PodSpec
	}{{"DaemonSet", ds.Namespace, &ds.Spec.Template.Spec}, {"Job", job.Namespace, &job.Spec.Template.Spec}} {
		checkPodSpec(t, c.what, c.spec, sa.Name)
		checkPprofOff(t, c.what, c.spec)
		if c.what == "DaemonSet" {
			checkWatchContainer(t, c.spec)
		}
		if c.ns != ns.Name {
			t.Errorf("%s in namespace %q, want %q", c.what, c.ns, ns.Name)
		}
	}
	sel := ds.Spec.Selector.MatchLabels
	for k, v := range sel {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("DaemonSet selector %v does not match its pods' labels %v", sel, ds.Spec.Template.Labels)
		}
	}
	js := job.Spec.Template.Spec
	if js.NodeName != nodeNamePlaceholder || js.RestartPolicy != corev1.RestartPolicyNever || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
		t.Errorf("Job: nodeName %q restartPolicy %q backoffLimit %v; want pinned to %s, never restarted", js.NodeName, js.RestartPolicy, job.Spec.BackoffLimit, nodeNamePlaceholder)
	}
	if !strings.Contains(job.Name, nodeNamePlaceholder) {
		t.Errorf("Job name %q does not carry the node's name", job.Name)
	}
}

// rbac is the RBAC objects of the manifests.
type rbac struct {
	sa          map[string]*corev1.ServiceAccount
	roles       map[string]*rbacv1.ClusterRole
	bindings    []*rbacv1.ClusterRoleBinding
	rolesByFile map[string][]*rbacv1.ClusterRole
}

func rbacOf(t *testing.T, objs map[string][]any) *rbac {
	t.Helper()
	rb := &rbac{sa: map[string]*corev1.ServiceAccount{}, roles: map[string]*rbacv1.ClusterRole{}, rolesByFile: map[string][]*rbacv1.ClusterRole{}}
	for _, o := range objs["ServiceAccount"] {
		sa := o.(*corev1.ServiceAccount)
		rb.sa[sa.Name] = sa
	}
	for _, o := range objs["ClusterRole"] {
		r := o.(*rbacv1.ClusterRole)
		rb.roles[r.Name] = r
	}
	for _, o := range objs["ClusterRoleBinding"] {
		rb.bindings = append(rb.bindings, o.(*rbacv1.ClusterRoleBinding))
	}
	files, _ := filepath.Glob(filepath.Join(deployDir, "kubernetes", "*.yaml"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		for name, r := range rb.roles {
			if regexp.MustCompile(`(?m)^kind: ClusterRole\nmetadata:\n  name: ` + regexp.QuoteMeta(name) + `\n`).Match(raw) {
				rb.rolesByFile[f] = append(rb.rolesByFile[f], r)
			}
		}
	}
	found := 0
	for _, rs := range rb.rolesByFile {
		found += len(rs)
	}
	if found != len(rb.roles) {
		t.Errorf("%d of %d ClusterRoles found in their files", found, len(rb.roles))
	}
	for _, b := range rb.bindings {
		if rb.roles[b.RoleRef.Name] == nil {
			t.Errorf("binding %s refers to role %s, which no manifest defines", b.Name, b.RoleRef.Name)
		}
	}
	return rb
}

// allowed is what a service account of the nodesnap namespace may do,
// through every binding: "resource verb".
func (rb *rbac) allowed(sa string) map[string]bool {
	out := map[string]bool{}
	for _, b := range rb.bindings {
		for _, s := range b.Subjects {
			if s.Kind != "ServiceAccount" || s.Name != sa || s.Namespace != "nodesnap" {
				continue
			}
			if role := rb.roles[b.RoleRef.Name]; role != nil {
				for _, r := range role.Rules {
					for _, res := range r.Resources {
						for _, v := range r.Verbs {
							out[res+" "+v] = true
						}
					}
				}
			}
		}
	}
	return out
}

// checkPprofOff: the pods of the manifests run with the least-privilege
// role, so every collection in them leaves pprof out rather than asking
// for what the role does not grant.
func checkPprofOff(t *testing.T, what string, spec *corev1.PodSpec) {
	t.Helper()
	for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
		if len(c.Args) == 0 || (c.Args[0] != "collect" && c.Args[0] != "watch") {
			continue
		}
		if !slices.Contains(c.Args, "--kubelet-pprof=false") {
			t.Errorf("%s container %s: no --kubelet-pprof=false, though its service account has no nodes/proxy", what, c.Name)
		}
	}
}

func checkPodSpec(t *testing.T, what string, spec *corev1.PodSpec, sa string) {
	t.Helper()
	if !spec.HostPID || !spec.HostNetwork || spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("%s: hostPID %v hostNetwork %v dnsPolicy %q; want the host's PID and network (kubelet on 127.0.0.1, the node's hostname)", what, spec.HostPID, spec.HostNetwork, spec.DNSPolicy)
	}
	if spec.ServiceAccountName != sa {
		t.Errorf("%s runs as service account %q, want %q", what, spec.ServiceAccountName, sa)
	}
	tolerAll := false
	for _, tl := range spec.Tolerations {
		tolerAll = tolerAll || tl.Operator == corev1.TolerationOpExists && tl.Key == "" && tl.Effect == ""
	}
	if !tolerAll {
		t.Errorf("%s does not tolerate every taint: %+v", what, spec.Tolerations)
	}
	vols := map[string]*corev1.Volume{}
	for i := range spec.Volumes {
		vols[spec.Volumes[i].Name] = &spec.Volumes[i]
	}
	all := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	var collect, hold *corev1.Container
	for i := range all {
		c := &all[i]
		if c.Image != imagePlaceholder {
			t.Errorf("%s container %s: image %q, want the placeholder %s", what, c.Name, c.Image, imagePlaceholder)
		}
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s container %s: imagePullPolicy %q, want IfNotPresent", what, c.Name, c.ImagePullPolicy)
		}
		if c.Resources.Limits.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s container %s has no cpu and memory limits", what, c.Name)
		}
		argv := containerArgv(t, what, c)
		if len(argv) < 2 {
			continue
		}
		switch argv[1] {
		case "collect":
			collect = c
		case "hold":
			hold = c
		}
	}
	if collect == nil || hold == nil {
		t.Fatalf("%s: no container runs nodesnap collect, or none nodesnap hold", what)
	}
	if collect.SecurityContext == nil || collect.SecurityContext.Privileged == nil || !*collect.SecurityContext.Privileged {
		t.Errorf("%s: %s is not privileged", what, collect.Name)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range collect.VolumeMounts {
		mounts[m.MountPath] = m
	}
	hostPath := func(m corev1.VolumeMount) string {
		if v := vols[m.Name]; v != nil && v.HostPath != nil {
			return v.HostPath.Path
		}
		return ""
	}
	host, ok := mounts["/host"]
	if !ok || !host.ReadOnly || hostPath(host) != "/" {
		t.Errorf("%s: the host's root is not mounted read-only at /host: %+v", what, host)
	}
	// containerd refuses HostToContainer (and Bidirectional) on a "/"
	// that is a private mount: the pod would never start.
	if host.MountPropagation != nil && *host.MountPropagation != corev1.MountPropagationNone {
		t.Errorf("%s: /host with mountPropagation %s: containerd refuses it where the node's / is a private mount", what, *host.MountPropagation)
	}
	kd, ok := mounts["/host/var/lib/kubelet"]
	if !ok || !kd.ReadOnly || hostPath(kd) != "/var/lib/kubelet" || kd.MountPropagation == nil || *kd.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("%s: the kubelet's directory is not mounted read-only at /host/var/lib/kubelet with HostToContainer: %+v", what, kd)
	}
	uid := false
	for _, e := range collect.Env {
		uid = uid || e.Name == "NODESNAP_POD_UID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid"
	}
	if !uid {
		t.Errorf("%s: %s does not get its pod's UID (NODESNAP_POD_UID from metadata.uid): its own pod could count as evidence", what, collect.Name)
	}
	argv := containerArgv(t, what, collect)
	flags := parseCollect(t, what, argv[2:])
	root, outDir := flags["root"], flags["output-dir"]
	if root != "/host" {
		t.Errorf("%s: --root %q, want /host", what, root)
	}
	out, ok := mounts[outDir]
	if !ok || out.ReadOnly || hostPath(out) != "/var/tmp/nodesnap" {
		t.Errorf("%s: --output-dir %s is not the writable hostPath /var/tmp/nodesnap: %+v", what, outDir, out)
	}
	if flags["host-output-dir"] != hostPath(out) {
		t.Errorf("%s: --host-output-dir %q, want the output volume's host path %q", what, flags["host-output-dir"], hostPath(out))
	}
	if flags["exit-zero-if-written"] != "true" {
		t.Errorf("%s: without --exit-zero-if-written a partial bundle (status 3) fails the init container", what)
	}

	// The hold container serves the same directory, read-only, where
	// bundle-cat looks by default.
	var holdDir string
	for _, e := range hold.Env {
		if e.Name == "NODESNAP_OUTPUT_DIR" {
			holdDir = e.Value
		}
	}
	ok = false
	for _, m := range hold.VolumeMounts {
		ok = ok || m.MountPath == holdDir && m.ReadOnly && hostPath(m) == hostPath(out)
	}
	if !ok {
		t.Errorf("%s: %s does not have the bundles read-only at $NODESNAP_OUTPUT_DIR (%q)", what, hold.Name, holdDir)
	}
}

// checkWatchContainer checks the DaemonSet's `nodesnap watch`: flags the
// real binary accepts (its own, and collect's after --), privileged, the
// host's root and the kubelet's directory as the collection has them, the
// collection's output directory, /metrics on loopback, a liveness probe on
// its /healthz.
func checkWatchContainer(t *testing.T, spec *corev1.PodSpec) {
	t.Helper()
	var watch, collect *corev1.Container
	for i := range spec.Containers {
		if c := &spec.Containers[i]; len(c.Args) > 0 && c.Args[0] == "watch" {
			watch = c
		}
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; len(c.Args) > 0 && c.Args[0] == "collect" {
			collect = c
		}
	}
	if watch == nil || collect == nil {
		t.Fatal("DaemonSet: no container runs nodesnap watch")
	}
	argv := containerArgv(t, "DaemonSet", watch)
	own, after := argv[2:], []string(nil)
	for i, a := range own {
		if a == "--" {
			own, after = own[:i], own[i+1:]
			break
		}
	}
	parseCollect(t, "DaemonSet watch (after --)", after)
	flags := map[string]string{}
	for _, a := range own {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	collectFlags := map[string]string{}
	for _, a := range collect.Args[1:] {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			collectFlags[k] = v
		}
	}
	if flags["root"] != "/host" || flags["output-dir"] != collectFlags["output-dir"] {
		t.Errorf("DaemonSet watch: --root %q --output-dir %q; want /host and the collection's %q", flags["root"], flags["output-dir"], collectFlags["output-dir"])
	}
	if !strings.HasPrefix(flags["listen"], "127.0.0.1:") {
		t.Errorf("DaemonSet watch: --listen %q, want loopback (the pod has the host's network)", flags["listen"])
	}
	if p := watch.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || "127.0.0.1:"+p.HTTPGet.Port.String() != flags["listen"] {
		t.Errorf("DaemonSet watch: liveness probe %+v, want GET /healthz on %s", watch.LivenessProbe, flags["listen"])
	}
	if watch.SecurityContext == nil || watch.SecurityContext.Privileged == nil || !*watch.SecurityContext.Privileged {
		t.Error("DaemonSet watch is not privileged")
	}
	mounts := func(c *corev1.Container) map[string]corev1.VolumeMount {
		m := map[string]corev1.VolumeMount{}
		for _, v := range c.VolumeMounts {
			m[v.MountPath] = v
		}
		return m
	}
	wm, cm := mounts(watch), mounts(collect)
	for _, p := range []string{"/host", "/host/var/lib/kubelet", collectFlags["output-dir"]} {
		a, b := wm[p], cm[p]
		if a.Name != b.Name || a.ReadOnly != b.ReadOnly || (a.MountPropagation == nil) != (b.MountPropagation == nil) ||
			(a.MountPropagation != nil && *a.MountPropagation != *b.MountPropagation) {
			t.Errorf("DaemonSet watch mounts %s as %+v, the collection as %+v: its collections must see what the first one saw", p, a, b)
		}
	}
}

// noShell are programs the image does not have.
var noShell = map[string]bool{"sh": true, "bash": true, "ash": true, "dash": true, "sleep": true, "tar": true, "cat": true, "env": true}

// containerArgv is a container's command line, checked to run the nodesnap
// binary directly (the image has no shell, sleep or tar) with a
// subcommand and flags that the real binary accepts.
func containerArgv(t *testing.T, what string, c *corev1.Container) []string {
	t.Helper()
	argv := append(append([]string(nil), c.Command...), c.Args...)
	for _, a := range argv {
		if noShell[filepath.Base(a)] || strings.ContainsAny(a, "\n;|&$`") {
			t.Errorf("%s container %s runs %q: the image has nothing but nodesnap (no shell, sleep or tar)", what, c.Name, argv)
			return nil
		}
	}
	if len(c.Command) == 0 || c.Command[0] != "/usr/local/bin/nodesnap" || len(argv) < 2 {
		t.Errorf("%s container %s: command %q, want /usr/local/bin/nodesnap and a subcommand", what, c.Name, argv)
		return nil
	}
	bin := testkit.Binary(t)
	// --help first, so that nothing runs; flags are still parsed.
	cmd := exec.Command(bin, append([]string{argv[1], "--help"}, argv[2:]...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s container %s: nodesnap %s: %v\n%s", what, c.Name, strings.Join(argv[1:], " "), err, out)
	} else if !bytes.Contains(out, []byte("nodesnap "+argv[1])) {
		t.Errorf("%s container %s: %q is not a nodesnap command:\n%s", what, c.Name, argv[1], out)
	}
	return argv
}

// parseCollect checks args against the real binary's collect flags
// (cobra parses flags before it shows help, so an unknown or malformed flag
// fails) and returns them parsed by name.
func parseCollect(t *testing.T, what string, args []string) map[string]string {
	t.Helper()
	bin := testkit.Binary(t)
	// --help first: last, it could be taken as the value of a flag that
	// lacks one, and a real collection would run.
	c := exec.Command(bin, append([]string{"collect", "--help"}, args...)...)
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("%s: nodesnap collect %s: %v\n%s", what, strings.Join(args, " "), err, out)
	}
	flags := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: nodesnap collect takes no arguments, got %q", what, a)
			continue
		}
		name, val, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				val = args[i+1]
				i++
			} else {
				val = "true"
			}
		}
		flags[name] = val
	}
	return flags
}

// The systemd units pass systemd's own checker (where it is installed)
// and run nodesnap with flags it has.
func TestSystemdUnits(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(deployDir, "systemd", "nodesnap.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart string
	for sc := bufio.NewScanner(bytes.NewReader(unit)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
			execStart = v
		}
	}
	f := strings.Fields(execStart)
	if len(f) < 2 || filepath.Base(f[0]) != "nodesnap" || f[1] != "collect" {
		t.Fatalf("ExecStart=%s does not run nodesnap collect", execStart)
	}
	flags := parseCollect(t, "nodesnap.service", f[2:])
	if flags["quiet"] != "true" {
		t.Errorf("the service is not quiet")
	}
	if k, _ := strconv.Atoi(flags["keep"]); k <= 0 {
		t.Errorf("the service keeps every bundle forever")
	}
	checkUnitLines(t, "nodesnap.service", unit, "SuccessExitStatus=3 4 5", "Nice=", "IOSchedulingClass=", "CPUQuota=", "MemoryMax=", "TimeoutStartSec=")
	timer, err := os.ReadFile(filepath.Join(deployDir, "systemd", "nodesnap.timer"))
	if err != nil {
		t.Fatal(err)
	}
	systemdVerify(t, f[0], map[string][]byte{"nodesnap.service": unit, "nodesnap.timer": timer})
}

// checkUnitLines fails t unless the unit file called name has a line
// starting with each of want, and fails it if the unit sets up a private
// mount namespace.
func checkUnitLines(t *testing.T, name string, unit []byte, want ...string) {
	t.Helper()
	for _, w := range want {
		if !bytes.Contains(unit, []byte("\n"+w)) {
			t.Errorf("%s lacks %s", name, w)
		}
	}
	for _, bad := range []string{"ProtectSystem=", "PrivateTmp=", "PrivateMounts=", "ProtectHome=", "ReadOnlyPaths="} {
		if bytes.Contains(unit, []byte("\n"+bad)) {
			t.Errorf("%s sets %s: a private mount namespace hides the host's mounts and holds them", name, bad)
		}
	}
}

// systemdVerify writes units (file name -> content) to a directory, with
// prog replaced by /bin/true (verify insists that ExecStart's program
// exists), and fails t unless `systemd-analyze verify` passes them
// silently. Without systemd-analyze it skips t, or fails it in CI (which
// installs systemd).
func systemdVerify(t *testing.T, prog string, units map[string][]byte) {
	t.Helper()
	testkit.RequireTool(t, "systemd-analyze")
	dir := t.TempDir()
	var names []string
	for name, unit := range units {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.ReplaceAll(unit, []byte(prog), []byte("/bin/true")), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	c := exec.Command("systemd-analyze", append([]string{"verify"}, names...)...)
	c.Dir = dir
	if outb, err := c.CombinedOutput(); err != nil || len(bytes.TrimSpace(outb)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, outb)
	}
}

// The watch service runs `nodesnap watch` with flags the real binary
// accepts, reloads with SIGHUP, gives an interrupted collection the time to
// write its bundle, and keeps the host's mount namespace.
func TestSystemdWatchUnit(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(deployDir, "systemd", "nodesnap-watch.service"))
	if err != nil {
		t.Fatal(err)
	}
	var execStart string
	for sc := bufio.NewScanner(bytes.NewReader(unit)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "ExecStart="); ok {
			execStart = v
		}
	}
	f := strings.Fields(execStart)
	if len(f) < 2 || filepath.Base(f[0]) != "nodesnap" || f[1] != "watch" {
		t.Fatalf("ExecStart=%s does not run nodesnap watch", execStart)
	}
	bin := testkit.Binary(t)
	if out, err := exec.Command(bin, append([]string{"watch", "--help"}, f[2:]...)...).CombinedOutput(); err != nil {
		t.Errorf("nodesnap %s: %v\n%s", strings.Join(f[1:], " "), err, out)
	}
	checkUnitLines(t, "nodesnap-watch.service", unit, "ExecReload=/bin/kill -HUP $MAINPID", "TimeoutStopSec=", "Restart=on-failure", "CPUQuota=", "MemoryMax=", "WantedBy=multi-user.target")
	systemdVerify(t, f[0], map[string][]byte{"nodesnap-watch.service": unit})
}

// Every `nodesnap collect` example in docs/ uses flags that exist.
func TestDocsExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("../docs/*.md")
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		inCode, shell := false, false
		for i, line := range strings.Split(string(b), "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "```") {
				inCode = !inCode
				// A command's printed output (```text) is not an example.
				lang := strings.TrimPrefix(l, "```")
				shell = lang == "" || lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
				continue
			}
			if !inCode || !shell {
				continue
			}
			_, rest, ok := strings.Cut(line, "nodesnap collect")
			if !ok || strings.Contains(line, "nodesnap collectors") {
				continue
			}
			rest = regexp.MustCompile(`\s(\||;|&&|>|2>|#|\\$).*$`).ReplaceAllString(" "+rest, "")
			var args []string
			for _, a := range strings.Fields(rest) {
				a = strings.Trim(a, `'"`)
				if strings.ContainsAny(a, "$…<>") {
					a = "PLACEHOLDER" // a shell variable or an elided value
				}
				if a != "" {
					args = append(args, a)
				}
			}
			parseCollect(t, filepath.Base(f)+":"+strconv.Itoa(i+1), args)
			n++
		}
	}
	t.Logf("%d nodesnap collect examples checked", n)
	if m := checkPodCommandExamples(t, files); m < 4 {
		t.Errorf("only %d nodesnap hold and bundle-cat examples found in docs/", m)
	}
	if n < 5 {
		t.Errorf("only %d nodesnap collect examples found in docs/", n)
	}
}

// podCommand finds `nodesnap hold ...` and `nodesnap bundle-cat ...` in a
// line, up to a shell operator.
var podCommand = regexp.MustCompile(`\bnodesnap (hold|bundle-cat)((?:\s+[^\s|;&>#]+)*)`)

// checkPodCommandExamples runs every hold and bundle-cat example of the
// docs' code blocks through the real binary's flag parser (--help first,
// so nothing runs) and returns how many it checked.
func checkPodCommandExamples(t *testing.T, files []string) int {
	t.Helper()
	bin := testkit.Binary(t)
	n := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		inCode, shell := false, false
		for i, line := range strings.Split(string(b), "\n") {
			if l := strings.TrimSpace(line); strings.HasPrefix(l, "```") {
				inCode = !inCode
				// A command's printed output (```text) is not an example.
				lang := strings.TrimPrefix(l, "```")
				shell = lang == "" || lang == "sh" || lang == "bash" || lang == "shell" || lang == "console"
				continue
			}
			if !inCode || !shell {
				continue
			}
			for _, m := range podCommand.FindAllStringSubmatch(line, -1) {
				args := []string{m[1], "--help"}
				for _, a := range strings.Fields(m[2]) {
					a = strings.Trim(a, `'"`)
					if strings.ContainsAny(a, "$…") {
						a = "PLACEHOLDER"
					}
					args = append(args, a)
				}
				if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
					t.Errorf("%s:%d: nodesnap %s: %v\n%s", filepath.Base(f), i+1, strings.Join(args, " "), err, out)
				}
				n++
			}
		}
	}
	t.Logf("%d nodesnap hold and bundle-cat examples checked", n)
	return n
}
