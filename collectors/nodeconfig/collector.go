package nodeconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/collectors"
	"github.com/nodesnap/nodesnap/collectors/hostfs"
	"github.com/nodesnap/nodesnap/internal/human"
)

// Options are the nodeconfig collector's flags.
type Options struct {
	Extra []string `json:"extra,omitempty"`
}

// opts are the options the flags set (in the supervisor); they reach the
// collector's child as JSON. Every default is the zero value.
var opts Options

func flags(fs *pflag.FlagSet) {
	opts = Options{}
	fs.StringSliceVar(&opts.Extra, "config-file", opts.Extra, "nodeconfig: also collect this host file, directory (its files, recursively) or glob (repeatable); each file's first 4 MiB, a directory or glob's first 256 files and 64 MiB, a cut said and the run partial")
}

// nodeConfigFiles are the node's configuration files an expert reads when a
// volume will not mount or unmount: how the kubelet, the runtime and the
// storage clients are set up. Secrets in them (kubeconfig tokens and keys,
// ceph keys, iSCSI CHAP secrets) are removed by the redactor like every
// other byte; the rest of each file is kept because its shape is evidence.
var nodeConfigFiles = []string{
	"/var/lib/kubelet/config.yaml",
	"/var/lib/kubelet/kubeconfig",
	"/etc/kubernetes/kubelet.conf",
	"/etc/kubernetes/bootstrap-kubelet.conf",
	"/etc/kubernetes/kubelet/kubelet-config.json",
	"/etc/default/kubelet",
	"/etc/sysconfig/kubelet",
	"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
	"/var/lib/kubelet/kubeadm-flags.env",
	"/etc/containerd/config.toml",
	"/etc/crio/crio.conf",
	"/etc/docker/daemon.json",
	"/etc/fstab",
	"/etc/multipath.conf",
	"/etc/iscsi/iscsid.conf",
	"/etc/iscsi/initiatorname.iscsi",
	"/etc/nfsmount.conf",
	"/etc/ceph/ceph.conf",
	"/etc/ceph/ceph.client.admin.keyring",
	"/etc/ceph/keyring",
	"/etc/modprobe.d/rbd.conf",
	"/etc/lvm/lvm.conf",
}

// nodeConfigDirs are directories whose files with the suffix are all
// collected: ceph names a keyring after its client
// (ceph.client.<id>.keyring, one per CSI driver and pool user), so no fixed
// list finds them.
var nodeConfigDirs = []struct{ dir, suffix string }{
	{"/etc/ceph", ".keyring"},
}

func init() {
	collectors.Register(collectors.Spec{
		Name:           "nodeconfig",
		Description:    "kubelet, runtime and storage-client configuration files (kubelet config and kubeconfig, containerd, fstab, multipath, iSCSI, ceph and every /etc/ceph/*.keyring), redacted",
		Requires:       "root for configuration files readable only by root (kubelet and runtime configuration)",
		DefaultEnabled: true,
		DefaultTimeout: 20 * time.Second,
		After:          []string{collectors.MountprobeName},
		Options:        &opts,
		Flags:          flags,
		Files:          files,
		Run:            collect,
	})
}

// NodeConfigFile is one entry of nodeconfig/files.json.
type NodeConfigFile struct {
	Path string `json:"path"`
	// From names the running daemon whose command line named the file
	// ("kubelet --config (pid 812)"); empty for the fixed list.
	From      string `json:"from,omitempty"`
	Collected bool   `json:"collected"`
	File      string `json:"file,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	Error     string `json:"error,omitempty"`
}

func collect(ctx context.Context, env *collectors.Env) error {
	var o Options
	if err := env.Options(&o); err != nil {
		return err
	}
	paths := append(append([]string(nil), nodeConfigFiles...), o.Extra...)
	paths = append(paths, listNodeConfigDirs(ctx, env, paths)...)
	// The files the running daemons name come first, read in their own
	// mount namespace; a fixed path they also name is not read twice.
	running := runningConfigs(ctx, env)
	via := map[string]runningConfig{}
	var order []string
	for _, rc := range running {
		if _, dup := via[rc.Path]; !dup {
			via[rc.Path] = rc
			order = append(order, rc.Path)
		}
	}
	// A file named twice (a --config-file that is also a file read by
	// default, or listed in a directory read already, or given twice) is
	// read once: the bundle holds one copy of each path.
	seen := map[string]bool{}
	for _, p := range order {
		seen[p] = true
	}
	for _, p := range paths {
		if path.IsAbs(p) {
			p = path.Clean(p)
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		order = append(order, p)
	}
	paths = order
	extra := map[string]bool{}
	for _, p := range o.Extra {
		if path.IsAbs(p) {
			extra[path.Clean(p)] = true
		}
	}
	specs := map[string]*specOf{} // file → the directory or glob it came from
	var specList []*specOf
	var list []NodeConfigFile
	for i := 0; i < len(paths); i++ {
		p := paths[i]
		if !path.IsAbs(p) {
			env.Notef("skipping %q: host paths must be absolute", p)
			continue
		}
		rec := NodeConfigFile{Path: p}
		sp := specs[p]
		if sp != nil {
			rec.From = "--config-file " + sp.spec
		}
		if extra[p] && hasMeta(p) {
			// A glob: its files take its place.
			paths = append(paths[:i+1], append(expandInto(ctx, env, p, specs, seen, &specList), paths[i+1:]...)...)
			continue
		}
		if env.Host().IsHung(hostfs.Path(p)) {
			rec.Error = "on a mount found hung earlier in this run; not touched"
			list = append(list, rec)
			continue
		}
		src := hostfs.Path(p)
		if rc, ok := via[p]; ok {
			rec.From, src = rc.From, rc.Via
		}
		// One worker item per file: /etc may hold a file on a network
		// mount, and one hung file must cost one item.
		max := int64(MaxConfigFileBytes)
		if sp != nil {
			max = min(max, MaxSpecBytes-sp.bytes)
			if max <= 0 {
				if sp.cut == "" {
					sp.cut = fmt.Sprintf("its files pass %d MiB; %s and the files after it are not collected", MaxSpecBytes>>20, p)
				}
				continue
			}
		}
		res, err := env.Host().Read(ctx, src, max)
		switch {
		case err != nil && isDirErr(err) && (extra[p] || (sp != nil && hasMeta(sp.spec))):
			// A directory given, or matched by a glob given: its files
			// take its place.
			paths = append(paths[:i+1], append(expandInto(ctx, env, p, specs, seen, &specList), paths[i+1:]...)...)
			continue
		case err != nil && isDirErr(err) && sp != nil:
			env.Notef("--config-file %s: %s is a link to a directory; not followed", sp.spec, p)
			continue
		case errors.Is(err, hostfs.ErrHung):
			rec.Error = "on a mount found hung earlier in this run; not touched"
			list = append(list, rec)
			continue
		case err == nil:
		case errors.Is(err, os.ErrNotExist):
			continue
		default:
			rec.Error = err.Error()
			list = append(list, rec)
			continue
		}
		rec.Collected = true
		rec.Truncated = res.Truncated
		rec.File = "files" + p
		if sp != nil {
			sp.bytes += int64(len(res.Data))
		}
		if res.Truncated {
			// Cut at the read: the manifest says so, as the run's own cap would.
			env.Partialf("%s is larger than %s: only its first %s are collected", p, human.Bytes(max), human.Bytes(max))
		}
		short, err := env.WriteHostFile(rec.File, res.Data, res.Truncated, collectors.HostPath(p))
		if err != nil {
			return err
		}
		rec.Truncated = rec.Truncated || short
		list = append(list, rec)
	}
	for _, sp := range specList {
		if sp.cut != "" {
			env.Partialf("--config-file %s: %s", sp.spec, sp.cut)
		}
	}
	if list == nil {
		list = []NodeConfigFile{}
	}
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := env.WriteFile("files.json", append(b, '\n')); err != nil {
		return err
	}
	for _, r := range list {
		if r.Error != "" && !strings.Contains(r.Error, "permission denied") {
			env.Partialf("%s: %s", r.Path, r.Error)
		}
	}
	return nil
}

// listNodeConfigDirs returns the files of nodeConfigDirs not in have. Each
// directory is listed in an isolated worker (it may be on a hung mount),
// with getdents only: no file is stat()ed or opened here.
func listNodeConfigDirs(ctx context.Context, env *collectors.Env, have []string) []string {
	seen := map[string]bool{}
	for _, p := range have {
		seen[p] = true
	}
	var out []string
	for _, d := range nodeConfigDirs {
		r, err := env.Host().List(ctx, hostfs.Path(d.dir), 1024)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, hostfs.ErrHung) {
				env.Notef("listing %s for %s files: %v", d.dir, d.suffix, err)
			}
			continue
		}
		names := make([]string, 0, len(r.Entries))
		for _, e := range r.Entries {
			if strings.HasSuffix(e.Name, d.suffix) && e.Type != unix.DT_DIR {
				names = append(names, e.Name)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			if p := path.Join(d.dir, n); !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}
