package layout

// The runtime collector's record: runtime/summary.json.

// RuntimeSummary is runtime/summary.json.
type RuntimeSummary struct {
	Runtimes []RuntimeStatus `json:"runtimes"`
}

// RuntimeStatus is what was found of one runtime.
type RuntimeStatus struct {
	// Name is containerd, cri-o or docker.
	Name string `json:"name"`
	// Present is true when one of its sockets exists.
	Present bool `json:"present"`
	// Socket is its API socket (host path) and SocketFound whether it
	// exists; DebugSocket likewise for containerd's pprof socket.
	Socket           string `json:"socket"`
	SocketFound      bool   `json:"socket_found"`
	DebugSocket      string `json:"debug_socket,omitempty"`
	DebugSocketFound bool   `json:"debug_socket_found,omitempty"`
	// ConfigFile is the configuration read for socket addresses, if any.
	ConfigFile string `json:"config_file,omitempty"`
	// CRIRuntimeName, CRIRuntimeVersion and CRIAPIVersion are what the
	// CRI Version call answered (containerd and CRI-O).
	CRIRuntimeName    string `json:"cri_runtime_name,omitempty"`
	CRIRuntimeVersion string `json:"cri_runtime_version,omitempty"`
	CRIAPIVersion     string `json:"cri_api_version,omitempty"`
	// Listed says whether its containers were listed by any means (the
	// CRI API, dockerd's API or a client program).
	Listed bool          `json:"listed,omitempty"`
	Items  []RuntimeItem `json:"items"`
	Notes  []string      `json:"notes,omitempty"`
}

// RuntimeItem is one command or socket request.
type RuntimeItem struct {
	// What names it: "goroutine dump", "ctr namespaces ls", ...
	What string `json:"what"`
	// Command is the argv of an external command; URL a socket request as
	// unix://<socket><path> (a CRI call: unix://<socket>, and Method the
	// gRPC method, such as /runtime.v1.RuntimeService/ListContainers).
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	Method  string   `json:"method,omitempty"`
	// File is the bundle file written, relative to runtime/.
	File            string  `json:"file,omitempty"`
	StatusCode      int     `json:"status_code,omitempty"`
	ExitCode        *int    `json:"exit_code,omitempty"`
	TimedOut        bool    `json:"timed_out,omitempty"`
	DurationSeconds float64 `json:"duration_seconds"`
	Bytes           int64   `json:"bytes,omitempty"`
	Error           string  `json:"error,omitempty"`
	// Skipped says why it was not attempted (a client not installed).
	Skipped string `json:"skipped,omitempty"`

	// Listing says this item listed the runtime's containers: the
	// collector's own bookkeeping for RuntimeStatus.Listed, not written.
	Listing bool `json:"-"`
}
