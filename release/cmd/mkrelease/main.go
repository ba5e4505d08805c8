// Command mkrelease builds nodesnap's release artifacts from binaries that
// `make` has already cross-compiled: the OCI image archive (`image`), the
// .deb and .rpm packages with the krew plugin's archives and manifest
// (`packages`) and the SHA256SUMS file (`sums`).
// It needs no Docker daemon, no registry and no network, and the same
// inputs with the same SOURCE_DATE_EPOCH give byte-identical outputs.
//
// It lives in its own module (github.com/nodesnap/nodesnap/release) so that
// nodesnap itself does not depend on go-containerregistry or nfpm.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

const usage = `usage: mkrelease COMMAND [flags]

commands:
  image      an OCI image archive (OCI layout + docker manifest.json) for every binary
  packages   a .deb, an .rpm and a krew archive (kubectl-nodesnap) for every binary,
             and the filled krew manifest nodesnap.yaml
  sums       SHA256SUMS over the files of a directory

Run "mkrelease COMMAND -h" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "image":
		err = cmdImage(args[1:], stdout, stderr)
	case "packages":
		err = cmdPackages(args[1:], stdout, stderr)
	case "sums":
		err = cmdSums(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mkrelease: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err == flag.ErrHelp {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "mkrelease %s: %v\n", args[0], err)
		if _, ok := err.(usageError); ok {
			return 2
		}
		return 1
	}
	return 0
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// binaryFlag collects repeated --binary ARCH=PATH flags.
type binaryFlag map[string]string

func (b binaryFlag) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaryFlag) Set(v string) error {
	arch, path, ok := strings.Cut(v, "=")
	if !ok || arch == "" || path == "" {
		return fmt.Errorf("want ARCH=PATH (e.g. amd64=dist/nodesnap-linux-amd64), got %q", v)
	}
	if _, dup := b[arch]; dup {
		return fmt.Errorf("architecture %s given twice", arch)
	}
	b[arch] = path
	return nil
}

// sourceDateEpoch reads SOURCE_DATE_EPOCH, the time every file, layer and
// package is stamped with (https://reproducible-builds.org/specs/source-date-epoch/).
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, usageError{"SOURCE_DATE_EPOCH is not set: give the commit time (git log -1 --format=%ct) so that builds are reproducible"}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, usageError{fmt.Sprintf("SOURCE_DATE_EPOCH=%q is not a number of seconds since 1970", v)}
	}
	return time.Unix(n, 0).UTC(), nil
}
