package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// pkgVersion is a git describe version in the parts deb and rpm order
// correctly: Prerelease sorts before Version (~), Metadata after (+).
type pkgVersion struct {
	Version, Prerelease, Metadata string
}

var (
	// v1.2.3, v1.2.3-rc1, v1.2.3-4-gabcdef0, v1.2.3-rc1-4-gabcdef0, any -dirty.
	taggedRE = regexp.MustCompile(`^v?([0-9]+(?:\.[0-9]+)*)(?:-((?:alpha|beta|rc|pre)[0-9A-Za-z.]*))?(?:-([0-9]+)-g([0-9a-f]{4,64}))?(-dirty)?$`)
	// abcdef0 or abcdef0-dirty: no tag yet (git describe --always).
	untaggedRE = regexp.MustCompile(`^([0-9a-f]{4,64})(-dirty)?$`)
)

// parsePkgVersion maps the output of `git describe --tags --always --dirty`
// to a package version. A commit after a tag sorts after that tag
// (1.2.3+4.gabcdef0); an untagged commit sorts before every release
// (0.0.0~git.abcdef0).
func parsePkgVersion(describe string) (pkgVersion, error) {
	if m := taggedRE.FindStringSubmatch(describe); m != nil {
		v := pkgVersion{Version: m[1], Prerelease: m[2]}
		var meta []string
		if m[3] != "" {
			meta = append(meta, m[3], "g"+m[4])
		}
		if m[5] != "" {
			meta = append(meta, "dirty")
		}
		v.Metadata = strings.Join(meta, ".")
		return v, nil
	}
	if m := untaggedRE.FindStringSubmatch(describe); m != nil {
		pre := "git." + m[1]
		if m[2] != "" {
			pre += ".dirty"
		}
		return pkgVersion{Version: "0.0.0", Prerelease: pre}, nil
	}
	if describe == "dev" {
		return pkgVersion{Version: "0.0.0", Prerelease: "dev"}, nil
	}
	return pkgVersion{}, fmt.Errorf("version %q is neither a release tag (v1.2.3, v1.2.3-rc1, with git describe's -N-gHASH and -dirty) nor a commit hash", describe)
}

// pkgSpec is everything the packages are built from.
type pkgSpec struct {
	Version  string            // git describe
	Root     string            // the repository: deploy/systemd, README.md
	Binaries map[string]string // GOARCH → path
	MTime    time.Time
}

const pkgDescription = `Snapshot a sick Kubernetes node into one redacted bundle
nodesnap captures mounts in every namespace and who holds them, mounts that
hang, directory shapes, the kubelet's and the container runtime's view, CSI
driver state and logs into one redacted tarball, and reads it back later to
name the cause. No stale mount or hung process can freeze a run.`

// pkgInfo is the nfpm description of the package for one architecture.
// nfpm's packagers change the Info they are given: build one per package.
func pkgInfo(spec pkgSpec, arch string) (*nfpm.Info, error) {
	v, err := parsePkgVersion(spec.Version)
	if err != nil {
		return nil, err
	}
	file := func(src, dst string, mode os.FileMode) *files.Content {
		return &files.Content{Source: src, Destination: dst, Type: files.TypeFile,
			FileInfo: &files.ContentFileInfo{Owner: "root", Group: "root", Mode: mode, MTime: spec.MTime}}
	}
	contents := files.Contents{
		file(spec.Binaries[arch], "/usr/bin/nodesnap", 0o755),
		file(filepath.Join(spec.Root, "deploy/systemd/nodesnap.service"), "/lib/systemd/system/nodesnap.service", 0o644),
		file(filepath.Join(spec.Root, "deploy/systemd/nodesnap.timer"), "/lib/systemd/system/nodesnap.timer", 0o644),
		file(filepath.Join(spec.Root, "deploy/systemd/nodesnap-watch.service"), "/lib/systemd/system/nodesnap-watch.service", 0o644),
		file(filepath.Join(spec.Root, "deploy/packaging/copyright"), "/usr/share/doc/nodesnap/copyright", 0o644),
		file(filepath.Join(spec.Root, "README.md"), "/usr/share/doc/nodesnap/README.md", 0o644),
	}
	for _, lic := range []string{"LICENSE", "LICENSE.md", "COPYING"} {
		if _, err := os.Stat(filepath.Join(spec.Root, lic)); err == nil {
			contents = append(contents, file(filepath.Join(spec.Root, lic), "/usr/share/doc/nodesnap/"+lic, 0o644))
			break
		}
	}
	// Maintainer scripts: removing the package stops and disables the
	// units it ships, so no enabled timer is left pointing at nothing.
	scripts := nfpm.Scripts{
		PostInstall: filepath.Join(spec.Root, "deploy/packaging/postinstall.sh"),
		PreRemove:   filepath.Join(spec.Root, "deploy/packaging/preremove.sh"),
		PostRemove:  filepath.Join(spec.Root, "deploy/packaging/postremove.sh"),
	}
	for _, src := range []string{scripts.PostInstall, scripts.PreRemove, scripts.PostRemove} {
		if _, err := os.Stat(src); err != nil {
			return nil, fmt.Errorf("a maintainer script for the package: %w", err)
		}
	}
	for _, c := range contents {
		if _, err := os.Stat(c.Source); err != nil {
			return nil, fmt.Errorf("a file for the package: %w", err)
		}
	}
	info := &nfpm.Info{
		Name:            "nodesnap",
		Arch:            arch,
		Platform:        "linux",
		Version:         v.Version,
		VersionSchema:   "none",
		Prerelease:      v.Prerelease,
		VersionMetadata: v.Metadata,
		Release:         "1",
		Section:         "admin",
		Priority:        "optional",
		Maintainer:      "nodesnap developers",
		Vendor:          "nodesnap",
		Homepage:        "https://github.com/nodesnap/nodesnap",
		Description:     pkgDescription,
		MTime:           spec.MTime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  scripts,
			Umask:    0o022,
			// rpm records the build host; a fixed one keeps the package
			// the same wherever it is built.
			RPM: nfpm.RPM{BuildHost: "reproducible", Compression: "gzip"},
			Deb: nfpm.Deb{Compression: "gzip"},
		},
	}
	return nfpm.WithDefaults(info), nil
}

// writePackage writes the package of one format and architecture into
// dir under its conventional name and returns the path.
func writePackage(dir, format string, spec pkgSpec, arch string) (string, error) {
	p, err := nfpm.Get(format)
	if err != nil {
		return "", err
	}
	info, err := pkgInfo(spec, arch)
	if err != nil {
		return "", err
	}
	return writeAtomic(dir, p.ConventionalFileName(info), func(w io.Writer) error {
		if err := p.Package(info, w); err != nil {
			return fmt.Errorf("building the %s %s package: %w", arch, format, err)
		}
		return nil
	})
}

// writeAtomic writes dir/name (0644) through a temporary file beside it,
// renamed into place once whole, so no output is ever half-written, and
// returns its path.
func writeAtomic(dir, name string, write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(dir, ".mkrelease-*")
	if err != nil {
		return "", fmt.Errorf("creating %s: %w", name, err)
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if err := write(f); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	out := filepath.Join(dir, name)
	if err := os.Rename(f.Name(), out); err != nil {
		return "", fmt.Errorf("putting %s in place: %w", name, err)
	}
	return out, nil
}

func cmdPackages(args []string, stdout, stderr io.Writer) error {
	fl := flag.NewFlagSet("packages", flag.ContinueOnError)
	fl.SetOutput(stderr)
	spec := pkgSpec{Binaries: binaryFlag{}}
	fl.Var(binaryFlag(spec.Binaries), "binary", "ARCH=PATH of a static linux binary (repeat per architecture)")
	fl.StringVar(&spec.Version, "version", "", "the version, as git describe --tags --always --dirty prints it")
	fl.StringVar(&spec.Root, "root", ".", "the repository (for deploy/systemd and README.md)")
	outDir := fl.String("out-dir", "", "directory to write the packages into")
	krewBase := fl.String("krew-base-url", "", "URL the krew manifest downloads the archives from (default "+fmt.Sprintf(defaultKrewBaseURL, "VERSION")+")")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *outDir == "" || spec.Version == "" || len(spec.Binaries) == 0 || fl.NArg() > 0 {
		return usageError{"need --out-dir, --version and at least one --binary ARCH=PATH"}
	}
	var err error
	if spec.MTime, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		return err
	}
	// The krew manifest's version and URL are checked before anything is written.
	if _, err := krewVersion(spec.Version); err != nil {
		return err
	}
	if _, err := krewBaseURL(*krewBase, spec.Version); err != nil {
		return err
	}
	arches := make([]string, 0, len(spec.Binaries))
	for a := range spec.Binaries {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	for _, arch := range arches {
		for _, format := range []string{"deb", "rpm"} {
			out, err := writePackage(*outDir, format, spec, arch)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, out)
		}
	}
	// The kubectl plugin: an archive per architecture and the krew manifest.
	outs, err := writeKrew(*outDir, spec, *krewBase)
	if err != nil {
		return err
	}
	for _, out := range outs {
		fmt.Fprintln(stdout, out)
	}
	return nil
}
