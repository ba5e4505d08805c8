//go:build !nofleet

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nodesnap/nodesnap/features/fleet"
	"github.com/nodesnap/nodesnap/features/objstore"
)

// fleetStore is fleet's Store on an S3-compatible store: keys under the
// location given with --to.
type fleetStore struct {
	c   *objstore.Client
	loc objstore.Location
}

var _ fleet.Store = (*fleetStore)(nil)

// newFleetStore reaches the store of --to with the SDK's credential
// chain: the identity that signs every node's URL.
func newFleetStore(ctx context.Context, to string) (*fleetStore, error) {
	loc, err := objstore.ParseURL(to)
	if err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	c, err := objstore.NewClient(ctx, objstore.ClientOptions{UserAgent: "nodesnap/" + toolVersion()})
	if err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	return &fleetStore{c: c, loc: loc}, nil
}

func (s *fleetStore) PresignPut(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return s.c.PresignPut(ctx, s.loc, key, ttl)
}

// Put writes a small object (a .sha256, fleet.json) through a temporary
// file, as the store's client uploads files.
func (s *fleetStore) Put(ctx context.Context, key string, body io.Reader, _ int64) error {
	f, err := os.CreateTemp("", ".nodesnap-fleet-*")
	if err != nil {
		return fmt.Errorf("staging %s: %w", key, err)
	}
	defer func() { _ = os.Remove(f.Name()) }()
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("staging %s: %w", key, err)
	}
	_, err = s.c.Put(ctx, s.loc, key, f.Name(), objstore.PutOptions{NoSumObject: true})
	return err
}

func (s *fleetStore) List(ctx context.Context, prefix string, fn func(string, int64) error) error {
	sub := s.loc
	sub.Prefix += prefix
	objs, err := s.c.List(ctx, sub)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := fn(prefix+o.Name, o.Size); err != nil {
			return err
		}
	}
	return nil
}

func (s *fleetStore) URL(key string) string { return s.loc.URL(key) }
