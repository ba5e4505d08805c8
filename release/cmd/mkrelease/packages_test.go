package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestParsePkgVersion(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    pkgVersion
		wantErr bool
	}{
		{"v1.2.3", pkgVersion{"1.2.3", "", ""}, false},
		{"1.2.3", pkgVersion{"1.2.3", "", ""}, false},
		{"v0.1", pkgVersion{"0.1", "", ""}, false},
		{"v1.2.3-dirty", pkgVersion{"1.2.3", "", "dirty"}, false},
		{"v1.2.3-4-gabcdef0", pkgVersion{"1.2.3", "", "4.gabcdef0"}, false},
		{"v1.2.3-4-gabcdef0-dirty", pkgVersion{"1.2.3", "", "4.gabcdef0.dirty"}, false},
		{"v1.2.3-rc1", pkgVersion{"1.2.3", "rc1", ""}, false},
		{"v1.2.3-rc.1-2-g0123456", pkgVersion{"1.2.3", "rc.1", "2.g0123456"}, false},
		{"166842e", pkgVersion{"0.0.0", "git.166842e", ""}, false},
		{"166842e-dirty", pkgVersion{"0.0.0", "git.166842e.dirty", ""}, false},
		{"dev", pkgVersion{"0.0.0", "dev", ""}, false},
		{"", pkgVersion{}, true},
		{"release-2024", pkgVersion{}, true},
		{"v1.2.3-4-gXYZ", pkgVersion{}, true},
		{"v1.2.3 ; rm -rf /", pkgVersion{}, true},
		{"v1.2.3-foo", pkgVersion{}, true},
	} {
		got, err := parsePkgVersion(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parsePkgVersion(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// debVersionRE is what dpkg accepts in an upstream version without an
// epoch or revision (deb-version(7)).
var debVersionRE = regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*$`)

func FuzzParsePkgVersion(f *testing.F) {
	for _, s := range []string{"v1.2.3", "v1.2.3-4-gabcdef0-dirty", "166842e-dirty", "dev", "v1.2.3-rc.1-2-g0123456", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parsePkgVersion(s)
		if err != nil {
			return
		}
		full := v.Version
		if v.Prerelease != "" {
			full += "~" + v.Prerelease
		}
		if v.Metadata != "" {
			full += "+" + v.Metadata
		}
		if !debVersionRE.MatchString(full) {
			t.Fatalf("%q gives package version %q, which dpkg and rpm refuse", s, full)
		}
	})
}

// need returns a program's path, or skips (fails where CI=true: CI
// installs it) when it is not installed.
func need(t *testing.T, prog, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(prog)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed (apt-get install %s)", prog, pkg)
		}
		t.Skipf("%s is not installed (apt-get install %s): packages not inspected", prog, pkg)
	}
	return p
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.Contains(b, []byte("module github.com/nodesnap/nodesnap\n")) {
		t.Fatalf("%s is not nodesnap's repository: %v", root, err)
	}
	return root
}

func buildPackages(t *testing.T, spec pkgSpec) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	out := map[string][]byte{}
	for _, format := range []string{"deb", "rpm"} {
		p, err := writePackage(dir, format, spec, "amd64")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	return out
}

func TestPackagesReproducible(t *testing.T) {
	_, bins := fakeInputs(t, "amd64")
	spec := pkgSpec{Version: "v1.2.3-4-gabcdef0", Root: repoRoot(t), Binaries: bins, MTime: testEpoch}
	a := buildPackages(t, spec)
	b := buildPackages(t, spec)
	for name := range a {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two builds of the same inputs", name)
		}
	}
	if _, ok := a["nodesnap_1.2.3+4.gabcdef0-1_amd64.deb"]; !ok {
		t.Errorf("packages %v: no nodesnap_1.2.3+4.gabcdef0-1_amd64.deb", keys(a))
	}
	if _, ok := a["nodesnap-1.2.3+4.gabcdef0-1.x86_64.rpm"]; !ok {
		t.Errorf("packages %v: no nodesnap-1.2.3+4.gabcdef0-1.x86_64.rpm", keys(a))
	}
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}

func TestDebContents(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	_, bins := fakeInputs(t, "amd64")
	dir := t.TempDir()
	deb, err := writePackage(dir, "deb", pkgSpec{Version: "166842e", Root: repoRoot(t), Binaries: bins, MTime: testEpoch}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	info, err := exec.Command(dpkgDeb, "-f", deb, "Package", "Version", "Architecture").CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -f: %v\n%s", err, info)
	}
	if want := "Package: nodesnap\nVersion: 0.0.0~git.166842e-1\nArchitecture: amd64\n"; string(info) != want {
		t.Errorf("control fields:\n%s\nwant:\n%s", info, want)
	}
	list, err := exec.Command(dpkgDeb, "-c", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v\n%s", err, list)
	}
	for _, want := range []string{
		"-rwxr-xr-x root/root .* 2023-11-14 22:13 ./usr/bin/nodesnap\n",
		"-rw-r--r-- root/root .* ./lib/systemd/system/nodesnap.service\n",
		"-rw-r--r-- root/root .* ./lib/systemd/system/nodesnap.timer\n",
		"-rw-r--r-- root/root .* ./lib/systemd/system/nodesnap-watch.service\n",
		"-rw-r--r-- root/root .* ./usr/share/doc/nodesnap/README.md\n",
		"-rw-r--r-- root/root .* ./usr/share/doc/nodesnap/copyright\n",
	} {
		if !regexp.MustCompile(want).Match(list) {
			t.Errorf("dpkg-deb -c lacks %q:\n%s", want, list)
		}
	}
	// Unpacked, the binary is the one given and runs.
	root := filepath.Join(dir, "root")
	if out, err := exec.Command(dpkgDeb, "-x", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(root, "usr/bin/nodesnap")).CombinedOutput()
	if err != nil || string(out) != "nodesnap for amd64\n" {
		t.Errorf("the unpacked /usr/bin/nodesnap: %q, %v", out, err)
	}
	unit, _ := os.ReadFile(filepath.Join(root, "lib/systemd/system/nodesnap.service"))
	if !bytes.Contains(unit, []byte("\nExecStart=/usr/bin/nodesnap ")) {
		t.Errorf("the packaged unit does not run the packaged /usr/bin/nodesnap")
	}
}

func TestRPMContents(t *testing.T) {
	rpm := need(t, "rpm", "rpm")
	_, bins := fakeInputs(t, "arm64")
	deb, err := writePackage(t.TempDir(), "rpm", pkgSpec{Version: "v2.0.0-rc1", Root: repoRoot(t), Binaries: bins, MTime: testEpoch}, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(rpm, "-qp", "--queryformat", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{BUILDHOST} %{BUILDTIME}\n", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm -qp: %v\n%s", err, out)
	}
	if want := "nodesnap 2.0.0~rc1 1 aarch64 reproducible 1700000000\n"; !strings.HasSuffix(string(out), want) {
		t.Errorf("rpm -qp: %q, want %q", out, want)
	}
	out, err = exec.Command(rpm, "-qplv", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm -qplv: %v\n%s", err, out)
	}
	for _, want := range []string{
		`-rwxr-xr-x .* root +root .* /usr/bin/nodesnap\n`,
		`-rw-r--r-- .* root +root .* /lib/systemd/system/nodesnap.service\n`,
		`-rw-r--r-- .* root +root .* /lib/systemd/system/nodesnap.timer\n`,
		`-rw-r--r-- .* root +root .* /lib/systemd/system/nodesnap-watch.service\n`,
		`/usr/share/doc/nodesnap/README.md\n`,
		`/usr/share/doc/nodesnap/copyright\n`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("rpm -qplv lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(rpm, "-qp", "--scripts", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("rpm -qp --scripts: %v\n%s", err, out)
	}
	for _, want := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "--no-reload disable"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rpm -qp --scripts lacks %q:\n%s", want, out)
		}
	}
}

// TestDebRemoveDisablesUnits runs the .deb's own maintainer scripts with a
// stand-in systemctl that records its arguments: removal disables every
// unit the package ships (so `dpkg -r` after README's `systemctl enable
// --now nodesnap.timer` leaves no enabled timer pointing at nothing), and an
// upgrade leaves them as the admin set them.
func TestDebRemoveDisablesUnits(t *testing.T) {
	dpkgDeb := need(t, "dpkg-deb", "dpkg")
	_, bins := fakeInputs(t, "amd64")
	dir := t.TempDir()
	deb, err := writePackage(dir, "deb", pkgSpec{Version: "v1.2.3", Root: repoRoot(t), Binaries: bins, MTime: testEpoch}, "amd64")
	if err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "control")
	if out, err := exec.Command(dpkgDeb, "-e", deb, control).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, out)
	}
	for _, name := range []string{"postinst", "prerm", "postrm"} {
		if fi, err := os.Stat(filepath.Join(control, name)); err != nil || fi.Mode()&0o111 == 0 {
			t.Fatalf("the .deb has no executable %s: %v", name, err)
		}
	}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	log := filepath.Join(dir, "systemctl.log")
	stub := "#!/bin/sh\necho \"$*\" >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(arg string) string {
		os.Remove(log)
		cmd := exec.Command("/bin/sh", filepath.Join(control, "prerm"), arg)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("prerm %s: %v\n%s", arg, err, out)
		}
		b, _ := os.ReadFile(log)
		return string(b)
	}
	got := run("remove")
	if !strings.Contains(got, "--no-reload disable nodesnap.timer nodesnap.service nodesnap-watch.service") {
		t.Errorf("prerm remove did not disable every unit; systemctl was called with:\n%s", got)
	}
	if got := run("upgrade"); got != "" {
		t.Errorf("prerm upgrade touched the units: %s", got)
	}
}

func TestSums(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b"), []byte("b\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte("stale"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	got, err := sums(dir)
	if err != nil {
		t.Fatal(err)
	}
	// sha256sum a b
	want := "87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7  a\n" +
		"0263829989b6fd954f72baaf2fc64bc2e2f01d692d4de72986ea808f6e99813f  b\n"
	if got != want {
		t.Errorf("sums:\n%s\nwant:\n%s", got, want)
	}
}
