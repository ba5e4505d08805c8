package kubelet

// Internals the external tests exercise directly.

// NewKubeletScrubberForTest exposes the token scrubber.
var NewKubeletScrubberForTest = newKubeletScrubber
