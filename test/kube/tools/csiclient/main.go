// Command csiclient creates a volume through a CSI driver's controller
// service, as the external-provisioner would, and prints its volume ID: the
// e2e cluster provisions the upstream hostpath driver's volume with it and
// then binds that volume to a static PersistentVolume.
//
//	csiclient -endpoint /var/lib/kubelet/plugins/NAME/csi.sock -name e2e-upstream-1
//
// CreateVolume is idempotent by name: run twice, it prints the same ID.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

func main() {
	endpoint := flag.String("endpoint", "", "the driver's CSI socket (a path)")
	name := flag.String("name", "", "the volume's name (CreateVolume is idempotent by name)")
	size := flag.Int64("bytes", 1<<20, "the volume's capacity in bytes")
	wait := flag.Duration("wait", time.Minute, "how long to retry while the driver is not yet serving")
	flag.Parse()
	if *endpoint == "" || *name == "" {
		fmt.Fprintln(os.Stderr, "usage: csiclient -endpoint SOCKET -name NAME [-bytes N]")
		os.Exit(2)
	}
	id, err := create(*endpoint, *name, *size, *wait)
	if err != nil {
		fmt.Fprintf(os.Stderr, "csiclient: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(id)
}

func create(endpoint, name string, size int64, wait time.Duration) (string, error) {
	conn, err := grpc.NewClient("unix://"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", endpoint, err)
	}
	defer conn.Close() //nolint:errcheck // a client connection: nothing to lose
	req := &csi.CreateVolumeRequest{
		Name:          name,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	deadline := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := csi.NewControllerClient(conn).CreateVolume(ctx, req)
		cancel()
		if err == nil {
			if resp.GetVolume().GetVolumeId() == "" {
				return "", errors.New("the driver created a volume without an ID")
			}
			return resp.GetVolume().GetVolumeId(), nil
		}
		if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
			return "", fmt.Errorf("CreateVolume %q at %s: %w", name, endpoint, err)
		}
		time.Sleep(time.Second)
	}
}
