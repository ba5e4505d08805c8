package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodesnap/nodesnap/bundle"
	"github.com/nodesnap/nodesnap/bundle/naming"
	"github.com/nodesnap/nodesnap/engine/isolate"
)

// Observation is what a signal saw in one round, for one trigger.
type Observation struct {
	Trigger string
	At      time.Time
	// Active says the trigger's condition holds now.
	Active bool
	// Key identifies what is wrong (the hung mounts, say): a different
	// key while active is a new episode, which may fire again once the
	// cooldown is over.
	Key      string
	Summary  string
	Evidence []string
}

// trigger is one trigger's state: an episode starts when its condition
// becomes true, fires once it has held For (and the cooldown since the
// last firing is over), and ends when the condition clears. A condition
// that flaps starts many short episodes, but the cooldown lets at most
// one of them fire in each cooldown period: no storm.
type trigger struct {
	name string
	cfg  TriggerConfig

	active bool
	since  time.Time
	key    string
	// fired says the current episode already fired.
	fired bool
	// suppressed says the current episode was already counted as
	// suppressed (by reason), so that the count is per episode.
	suppressed map[string]bool
	lastFired  time.Time
	last       Observation
}

// decision is what observe concluded.
type decision int

const (
	idle decision = iota
	pending
	fire
	coolingDown
)

func (t *trigger) observe(o Observation) decision {
	t.last = o
	if !o.Active {
		t.active, t.fired, t.key, t.suppressed = false, false, "", nil
		return idle
	}
	if !t.active {
		t.active, t.since, t.fired, t.key, t.suppressed = true, o.At, false, o.Key, nil
	} else if o.Key != t.key {
		// Something else went wrong meanwhile: a new episode, whose
		// For counts from the start of the old one (the node has been
		// sick that long).
		t.key, t.fired, t.suppressed = o.Key, false, nil
	}
	if t.fired {
		return idle
	}
	if o.At.Sub(t.since) < t.cfg.For {
		return pending
	}
	if !t.lastFired.IsZero() && o.At.Sub(t.lastFired) < t.cfg.Cooldown {
		return coolingDown
	}
	return fire
}

// markFired records that the current episode started a collection.
func (t *trigger) markFired(at time.Time) {
	t.fired, t.lastFired = true, at
}

// markSuppressed reports whether this episode is suppressed for reason
// for the first time.
func (t *trigger) markSuppressed(reason string) bool {
	if t.suppressed == nil {
		t.suppressed = map[string]bool{}
	}
	if t.suppressed[reason] {
		return false
	}
	t.suppressed[reason] = true
	return true
}

// rateLimit allows at most max collections in any hour.
type rateLimit struct {
	starts []time.Time
}

func (r *rateLimit) allow(now time.Time, max int) bool {
	cut := now.Add(-time.Hour)
	i := sort.Search(len(r.starts), func(i int) bool { return r.starts[i].After(cut) })
	r.starts = r.starts[i:]
	return len(r.starts) < max
}

func (r *rateLimit) add(now time.Time) { r.starts = append(r.starts, now) }

// seed counts the collections of the last hour from the bundles already
// in dir, so that a restart (systemd, a crash-looping container, an init
// collection before the watch) does not reset the hour's count. Only
// bundles this host wrote count (ownBundle): the output directory may be
// shared (/var/tmp, mode 1777), and a name is something anyone can give a
// file. A name dated in the future is not a collection that happened: it
// is ignored.
//
// The directory and the manifests in it are read in an isolated worker of
// pool, under its deadline (opSeed), never in the watcher itself: a FIFO
// or a hung mount planted where the bundles are costs the worker and the
// deadline, and the hour's count then starts at 0, said by the error.
func (r *rateLimit) seed(ctx context.Context, pool *isolate.Pool, dir string, now time.Time) error {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs // the worker resolves paths from "/"
	}
	var res SeedResult
	if err := pool.Do(ctx, opSeed, SeedRequest{Dir: dir, Now: now, UID: os.Geteuid(), Max: maxSeeded}, &res); err != nil {
		var he *isolate.HungError
		if errors.As(err, &he) {
			return fmt.Errorf("reading %s for the collections of the last hour did not finish within %s (a hung mount or a file that blocks in it?)", dir, pool.Timeout())
		}
		return fmt.Errorf("reading %s for the collections of the last hour: %w", dir, err)
	}
	r.starts = append(r.starts, res.Starts...)
	sort.Slice(r.starts, func(i, j int) bool { return r.starts[i].Before(r.starts[j]) })
	return nil
}

// seedTimeout bounds the reading of the output directory at start.
const seedTimeout = 20 * time.Second

// SeedRequest asks for the start times of the bundles in Dir that this
// host's nodesnap (running as UID) wrote in the hour before Now.
type SeedRequest struct {
	Dir string    `json:"dir"`
	Now time.Time `json:"now"`
	UID int       `json:"uid"`
	Max int       `json:"max"`
}

// SeedResult holds those start times, at most Max.
type SeedResult struct {
	Starts []time.Time `json:"starts,omitempty"`
}

// seedStarts is opSeed, in a worker.
func seedStarts(rq SeedRequest) (any, error) {
	ents, err := os.ReadDir(rq.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return SeedResult{}, nil
		}
		return nil, err
	}
	cut := rq.Now.Add(-time.Hour)
	var res SeedResult
	for _, e := range ents {
		n, ok := naming.ParseName(e.Name())
		if !ok || !n.Time.After(cut) || n.Time.After(rq.Now) {
			continue
		}
		if len(res.Starts) >= rq.Max {
			break
		}
		if t := e.Type(); t&fs.ModeType != 0 {
			// The listing says what it is without a stat: a directory (a
			// mount point, perhaps hung), a link, a FIFO is no bundle.
			continue
		}
		if ownBundle(filepath.Join(rq.Dir, e.Name()), n, rq.UID) {
			res.Starts = append(res.Starts, n.Time)
		}
	}
	return res, nil
}

// maxSeeded bounds the bundles seed opens: far more than any
// --max-per-hour allows in an hour.
const maxSeeded = 1000

// ownBundle says whether the file at p, named n, is a bundle this host's
// nodesnap wrote: a regular file (not a link) owned by uid, the user
// nodesnap runs as (collect writes its bundles as that user; a planted
// file belongs to whoever planted it), whose manifest, the archive's
// first entry, names the host and the start time its name says (a bundle
// encrypted with --encrypt-to cannot be opened here: owner and a size
// above zero do). It runs in a worker (seedStarts); the file is opened
// only as the regular file it was found to be, so a FIFO put in its place
// meanwhile is not waited on.
func ownBundle(p string, n naming.Name, uid int) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) != uid {
		return false
	}
	if n.Encrypted {
		return true
	}
	fd, err := isolate.OpenRegular(p, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), p)
	defer func() { _ = f.Close() }() // read-only: nothing to lose
	var ost unix.Stat_t
	if unix.Fstat(fd, &ost) != nil || ost.Dev != st.Dev || ost.Ino != st.Ino {
		return false // not the file looked at: swapped meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, _, err := bundle.ReadManifestFrom(ctx, f)
	if err != nil {
		return false
	}
	return naming.SafeHost(m.Host.Hostname) == n.Host && m.StartedAt.UTC().Truncate(time.Second).Equal(n.Time)
}

// window counts events in the last d, for the log triggers.
type window struct {
	at []time.Time
	// lines are the newest lines (evidence), at most keepLines.
	lines []string
}

const keepLines = 10

func (w *window) add(at time.Time, line string) {
	w.at = append(w.at, at)
	if len(w.at) > 10000 {
		w.at = w.at[len(w.at)-10000:]
	}
	w.lines = append(w.lines, line)
	if len(w.lines) > keepLines {
		w.lines = w.lines[len(w.lines)-keepLines:]
	}
}

func (w *window) count(now time.Time, d time.Duration) int {
	cut := now.Add(-d)
	i := sort.Search(len(w.at), func(i int) bool { return w.at[i].After(cut) })
	w.at = w.at[i:]
	if len(w.at) == 0 {
		w.lines = nil
	}
	return len(w.at)
}
