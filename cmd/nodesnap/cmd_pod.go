package main

// Commands for running nodesnap in a pod whose image holds nothing but the
// nodesnap binary: no shell, no sleep, no tar. `hold` keeps the pod (and
// its bundle) up after the collection; `bundle-cat` streams one bundle out
// through `kubectl exec`, which is what `kubectl cp` would need tar for.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/supervisor"
)

// OutputDirEnv names the bundle directory for hold and bundle-cat when
// --dir is not given (the manifests set it in the hold container).
const OutputDirEnv = "NODESNAP_OUTPUT_DIR"

func defaultBundleDir() string {
	if d := os.Getenv(OutputDirEnv); d != "" {
		return d
	}
	return supervisor.DefaultOutputDir
}

func newHoldCommand() *cobra.Command {
	var dir string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "hold",
		Short: "Wait (for a signal or --for) so that a pod stays up while its bundle is copied out",
		Long: `Hold does nothing until it receives SIGTERM or SIGINT, or until --for has passed, and
then exits with status 0. It is the long-running container of nodesnap's Kubernetes Job
and DaemonSet: the collection runs in an init container, and the pod stays up, Ready,
while its bundle is copied out with 'nodesnap bundle-cat'. It first prints the bundles
in --dir and how to copy the newest.

` + exitHelp(exitLineOK, "1  fatal: the output directory or the bundle could not be read", exitLineUsage),
		Example: `  # the hold container of deploy/kubernetes/job.yaml
  nodesnap hold --dir /output --for 1h`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir == "" {
				dir = defaultBundleDir()
			}
			if wait < 0 {
				return &supervisor.UsageError{Msg: "--for must not be negative"}
			}
			return runHold(cmd.Context(), dir, wait, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "directory whose bundles to list (default $"+OutputDirEnv+", else "+supervisor.DefaultOutputDir+")")
	cmd.Flags().DurationVar(&wait, "for", 0, "exit after this long (0: only on a signal)")
	return cmd
}

func runHold(ctx context.Context, dir string, wait time.Duration, out io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	names, err := listBundles(dir)
	switch {
	case err != nil:
		fmt.Fprintf(out, "nodesnap: holding; %v\n", err)
	case len(names) == 0:
		fmt.Fprintf(out, "nodesnap: holding; no bundle in %s\n", dir)
	default:
		fmt.Fprintf(out, "nodesnap: holding; %d bundle(s) in %s, newest first:\n", len(names), dir)
		for _, n := range names {
			fmt.Fprintln(out, "  "+n)
		}
		fmt.Fprintf(out, "copy the newest with: kubectl exec POD -c CONTAINER -- nodesnap bundle-cat --dir %s %s > %s\n", dir, names[0], names[0])
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		return nil
	}
	<-ctx.Done()
	return nil
}

func newBundleCatCommand() *cobra.Command {
	var dir string
	var list bool
	cmd := &cobra.Command{
		Use:   "bundle-cat {NAME|latest}",
		Short: "Write one bundle of the output directory to stdout (to copy it out of a pod)",
		Long: `Bundle-cat writes one bundle from the output directory to standard output, byte for
byte, so that a bundle can be copied out of a pod whose image has no tar (kubectl cp
needs it): kubectl exec without -t passes binary data unchanged. NAME is a bundle's file
name (nodesnap-<host>-<time>.tar.gz), or a path to it directly in --dir, or 'latest' for
the newest. Anything else is refused: a name outside --dir, a file not named like a
bundle, a symbolic link, anything but a regular file. It refuses to write to a
terminal. --list prints the bundles' names, newest first.

` + exitHelp(exitLineOK, "1  fatal: the output directory or the bundle could not be read", exitLineUsage),
		Example: `  # from your machine: the newest bundle of a nodesnap pod
  kubectl -n nodesnap exec POD -c hold -- nodesnap bundle-cat latest > bundle.tar.gz
  nodesnap validate bundle.tar.gz

  # which bundles the pod has
  kubectl -n nodesnap exec POD -c hold -- nodesnap bundle-cat --list`,
		Args: func(cmd *cobra.Command, args []string) error {
			if list {
				return argsUsage(cobra.NoArgs)(cmd, args)
			}
			return argsUsage(cobra.ExactArgs(1))(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				dir = defaultBundleDir()
			}
			if list {
				names, err := listBundles(dir)
				if err != nil {
					return err
				}
				for _, n := range names {
					fmt.Fprintln(cmd.OutOrStdout(), n)
				}
				return nil
			}
			return bundleCat(dir, args[0], cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the output directory (default $"+OutputDirEnv+", else "+supervisor.DefaultOutputDir+")")
	cmd.Flags().BoolVar(&list, "list", false, "list the bundles in --dir, newest first, instead")
	return cmd
}

// listBundles returns the names of the regular files in dir named like
// bundles, newest first (by the time in the name, then its -N).
func listBundles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing the output directory: %w", err)
	}
	var names []string
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if _, ok := naming.ParseName(e.Name()); ok {
			names = append(names, e.Name())
		}
	}
	naming.SortNewest(names)
	return names, nil
}

// bundleName resolves what the user asked for to a bundle's file name in
// dir, or refuses it (a usage error).
func bundleName(dir, arg string) (string, error) {
	if arg == "latest" {
		names, err := listBundles(dir)
		if err != nil {
			return "", err
		}
		if len(names) == 0 {
			return "", fmt.Errorf("no bundle in %s", dir)
		}
		return names[0], nil
	}
	name := arg
	if strings.Contains(arg, "/") {
		// Only ever dir/<name> is opened; a path must say the same.
		argDir, err1 := filepath.Abs(filepath.Dir(arg))
		absDir, err2 := filepath.Abs(dir)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("resolving %s: %w", arg, err)
		}
		if argDir != absDir {
			return "", &supervisor.UsageError{Msg: fmt.Sprintf("%s is not in the output directory %s (see --dir)", arg, dir)}
		}
		name = filepath.Base(arg)
	}
	if _, ok := naming.ParseName(name); !ok {
		return "", &supervisor.UsageError{Msg: fmt.Sprintf("%q is not a bundle's name (nodesnap-<host>-<time>.tar.gz); 'nodesnap bundle-cat --list' lists them", name)}
	}
	return name, nil
}

// bundleCat copies one bundle in dir to w. The file is opened relative to
// dir without following a symbolic link, and must be a regular file.
func bundleCat(dir, arg string, w io.Writer) error {
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) {
		return &supervisor.UsageError{Msg: "standard output is a terminal: redirect it to a file (and with kubectl exec, leave out -t, which alters binary data)"}
	}
	name, err := bundleName(dir, arg)
	if err != nil {
		return err
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the output directory: %w", &os.PathError{Op: "open", Path: dir, Err: err})
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	unix.Close(dfd)
	if errors.Is(err, unix.ELOOP) {
		return &supervisor.UsageError{Msg: fmt.Sprintf("%s is a symbolic link; only a bundle itself is copied", name)}
	}
	if err != nil {
		return fmt.Errorf("opening the bundle: %w", &os.PathError{Op: "open", Path: filepath.Join(dir, name), Err: err})
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, name))
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return &supervisor.UsageError{Msg: fmt.Sprintf("%s is not a regular file", name)}
	}
	n, err := io.Copy(w, f)
	if err != nil {
		return fmt.Errorf("copying %s after %d bytes: %w", name, n, err)
	}
	if n != st.Size() {
		return fmt.Errorf("copied %d bytes of %s, which has %d: it changed while it was copied", n, name, st.Size())
	}
	return nil
}
