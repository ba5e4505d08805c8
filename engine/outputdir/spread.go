package outputdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodesnap/nodesnap/redact"
)

// Spread is the run's last pass over the staged files, before they are
// hashed: every value a collector masked (as keyed hashes) is masked
// wherever else it is. Skip names the files it leaves alone
// ("collector/rel": binary artifacts).
type Spread struct {
	redact.Spread
	Skip map[string]bool `json:"skip,omitempty"`
}

type HashResult struct {
	// Replaced says the staging directory is gone or is not the one the
	// run made: the output directory was removed (or moved) during the
	// run, and a collector made a new one.
	Replaced bool                    `json:"replaced,omitempty"`
	Files    map[string][]HashedFile `json:"files"`
}

// maskStaged runs the last masking pass over every staged text file (see
// Spread) and returns path → values masked, for the files that had any.
func maskStaged(rq hashReq) (map[string]int, error) {
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
	return rq.Spread.MaskFiles(paths)
}
