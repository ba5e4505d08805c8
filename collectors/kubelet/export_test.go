package kubelet

// Internals the external tests exercise directly.

// NewKubeletScrubberForTest exposes the token scrubber.
var NewKubeletScrubberForTest = newKubeletScrubber

// ParseKubeletServingForTest exposes the kubelet configuration reader.
var ParseKubeletServingForTest = parseKubeletServing
