package outputdir

// HashedFile is one staged file.
type HashedFile struct {
	Rel    string `json:"rel"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Masked is how many values masked elsewhere in the bundle the last
	// pass masked in this file (see Spread).
	Masked int `json:"masked,omitempty"`
}

// HashResult is what Hash found: every staged file, hashed.
type HashResult struct {
	// Replaced says the staging directory is gone or is not the one the
	// run made: the output directory was removed (or moved) during the
	// run, and a collector made a new one.
	Replaced bool                    `json:"replaced,omitempty"`
	Files    map[string][]HashedFile `json:"files"`
}
