package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"

	"github.com/nodesnap/nodesnap/features/objstore"
	"github.com/nodesnap/nodesnap/read/fleetview"
)

// storeReadParallel is how many bundles fleet analyze reads from a store
// at once (each streamed, never held whole).
const storeReadParallel = 4

// smallObjectLimit bounds what is read of a .sha256 or fleet.json object.
const smallObjectLimit = 64 << 20

// loadStoreFleet reads every bundle under an s3:// location (fleet
// collect --to's, or any bundles with a .sha256 beside them), each
// checked against its .sha256 as it streams, and the nodes each run's
// fleet.json lists without a bundle.
func loadStoreFleet(ctx context.Context, where string) (*fleetview.View, error) {
	loc, err := objstore.ParseURL(where)
	if err != nil {
		return nil, err
	}
	c, err := objstore.NewClient(ctx, objstore.ClientOptions{UserAgent: "nodesnap/" + toolVersion()})
	if err != nil {
		return nil, err
	}
	objs, err := c.List(ctx, loc)
	if err != nil {
		return nil, err
	}
	var bundles, sums, reports []string
	for _, o := range objs {
		base := path.Base(o.Name)
		switch {
		case fleetview.IsBundleName(base):
			bundles = append(bundles, o.Name)
		case strings.HasSuffix(o.Name, ".sha256"):
			sums = append(sums, o.Name)
		case base == fleetview.FleetFile:
			reports = append(reports, o.Name)
		}
	}
	small := func(name string) ([]byte, error) {
		rc, err := c.Get(ctx, loc, name)
		if err != nil {
			return nil, err
		}
		defer func() { _ = rc.Close() }() // read-only
		return io.ReadAll(io.LimitReader(rc, smallObjectLimit))
	}
	// The checksums, a few at once.
	sumOf := make(map[string]string, len(sums))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, name := range sums {
		wg.Add(1)
		sem <- struct{}{}
		go func(name string) {
			defer wg.Done()
			defer func() { <-sem }()
			if b, err := small(name); err == nil {
				mu.Lock()
				sumOf[strings.TrimSuffix(name, ".sha256")] = fleetview.ParseChecksum(b)
				mu.Unlock()
			}
		}(name)
	}
	wg.Wait()
	missing, err := storeMissing(reports, small)
	if err != nil {
		return nil, err
	}
	names := map[string]int{}
	for _, b := range bundles {
		names[bundleNode(b)]++
	}
	srcs := make([]fleetview.Source, 0, len(bundles))
	for _, b := range bundles {
		node := bundleNode(b)
		if names[node] > 1 {
			node = strings.TrimSuffix(b, path.Base(b)) + node // the same node in two runs
		}
		srcs = append(srcs, fleetview.Source{Node: node, Bundle: loc.URL(b), SHA256: sumOf[b],
			Open: func(ctx context.Context) (io.ReadCloser, error) { return c.Get(ctx, loc, b) }})
	}
	return fleetview.LoadSources(ctx, loc.String(), srcs, missing, storeReadParallel)
}

// bundleNode is the node a bundle's name gives (fleet names them
// <node>.tar.gz).
func bundleNode(name string) string {
	n := path.Base(name)
	for _, ext := range []string{".tar.gz", ".tar.zst", ".tgz"} {
		n = strings.TrimSuffix(n, ext)
	}
	return n
}

// storeMissing reads the runs' fleet.json: the nodes without a bundle,
// with why.
func storeMissing(reports []string, read func(string) ([]byte, error)) ([]fleetview.Node, error) {
	var missing []fleetview.Node
	for _, name := range reports {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		var rep struct {
			Nodes []struct {
				Node   string `json:"node"`
				Status string `json:"status"`
				Reason string `json:"reason"`
				Object string `json:"object"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			return nil, fmt.Errorf("%s is not a fleet record nodesnap fleet collect wrote: %w", name, err)
		}
		for _, r := range rep.Nodes {
			if r.Object == "" {
				missing = append(missing, fleetview.Node{Name: r.Node, FleetStatus: r.Status, Reason: r.Reason, Error: r.Status + ": " + r.Reason})
			}
		}
	}
	return missing, nil
}
