//go:build nofleet

package main

import (
	"context"
	"errors"
	"io"

	"github.com/nodesnap/nodesnap/read/analyze"
)

// The node image's build has no Kubernetes client: explain reads bundles.
func collectPodNode(context.Context, *explainOptions, string, io.Writer) (string, *analyze.Explanation, error) {
	return "", nil, errors.New("this nodesnap is the node image's build, without the Kubernetes client: give it --bundle FILE, or run 'nodesnap explain' from the release binary or package on a machine with a kubeconfig")
}
