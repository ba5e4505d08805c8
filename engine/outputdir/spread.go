package outputdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Spread is the run's last pass over the staged files, before they are
// hashed: every value a collector masked (as keyed hashes) is masked
// wherever else it is (see redact.Spread). Pass is the masker's own
// request, opaque here; Skip names the files it leaves alone
// ("collector/rel": binary artifacts).
type Spread struct {
	Pass json.RawMessage `json:"pass"`
	Skip map[string]bool `json:"skip,omitempty"`
}

// Masker runs the last pass in the output directory's worker: given the
// Pass and the staged files, it masks them in place and returns path →
// values masked. The supervisor's package sets it (it knows the
// redactor; this package does not import it), in every process of the
// binary, the worker included.
var Masker func(pass json.RawMessage, paths []string) (map[string]int, error)

// maskStaged runs the last masking pass over every staged text file (see
// Spread) and returns path → values masked, for the files that had any.
func maskStaged(rq hashReq) (map[string]int, error) {
	if Masker == nil {
		return nil, errors.New("the last masking pass was asked for, but this binary has none")
	}
	var paths []string
	for _, c := range rq.Collectors {
		root := filepath.Join(rq.Staging.Path, c)
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil
				}
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.Type().IsRegular() && !rq.Spread.Skip[c+"/"+filepath.ToSlash(rel)] {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing staged files of %s: %w", c, err)
		}
	}
	return Masker(rq.Spread.Pass, paths)
}
