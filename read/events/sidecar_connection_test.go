package events

import "testing"

// A CSI sidecar (node-driver-registrar) losing or failing its connection
// to the driver's socket, which it names by its unix:// address inside
// its pod, is a plugin connection with that socket as its object.
func TestSidecarConnectionToDriverSocket(t *testing.T) {
	cases := []struct {
		name, line, path string
		op               Op
		outcome          Outcome
	}{
		{name: "registrar lost its connection", op: OpConnect, outcome: OutcomeFailed, path: "/csi/csi.sock",
			line: `E0323 21:21:15.690492       1 connection.go:129] Lost connection to unix:///csi/csi.sock.`},
		{name: "another socket directory", op: OpConnect, outcome: OutcomeFailed, path: "/plugin/csi.sock",
			line: `E0202 14:07:00.314932       1 connection.go:129] Lost connection to unix:///plugin/csi.sock.`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, ok := NewParser(ref).Parse([]byte(c.line))
			if !ok {
				t.Fatalf("not parsed")
			}
			if ev.Op != c.op || ev.Outcome != c.outcome {
				t.Fatalf("op %q outcome %v, want %q %v", ev.Op, ev.Outcome, c.op, c.outcome)
			}
			if ev.Keys.Path != c.path {
				t.Errorf("socket %q, want %q", ev.Keys.Path, c.path)
			}
		})
	}
	// A sidecar's ordinary start names the address without a failure.
	ev, ok := NewParser(ref).Parse([]byte(`I0323 21:20:55.915833       1 connection.go:151] Connecting to unix:///csi/csi.sock`))
	if ok && ev.Outcome == OutcomeFailed {
		t.Errorf("a connection starting read as failed: %+v", ev)
	}
}
