package kubelet

// Internals the external tests exercise directly.

// NewKubeletScrubberForTest exposes the token scrubber.
var NewKubeletScrubberForTest = newKubeletScrubber

// ParseKubeletServingForTest exposes the kubelet configuration reader.
var ParseKubeletServingForTest = parseKubeletServing

// SameNodeForTest exposes how a certificate's node name is matched.
var SameNodeForTest = sameNode
