package dirshape

import (
	"fmt"
	"sort"
	"time"

	"github.com/nodesnap/nodesnap/bundle/layout"
	"github.com/nodesnap/nodesnap/collectors/internal/shared"
)

// finalize turns what a scan counted into its root's result: the largest
// directories in order, the leftover groups, and whether (and why) the
// counts are lower bounds.
func (s *scanner) finalize(elapsed time.Duration) {
	out := s.out
	out.Largest = append(out.Largest, s.top...)
	sort.SliceStable(out.Largest, func(i, j int) bool {
		if a, b := out.Largest[i].Size(), out.Largest[j].Size(); a != b {
			return a > b
		}
		return out.Largest[i].Path < out.Largest[j].Path
	})
	for _, g := range s.groups {
		out.Deleting = append(out.Deleting, *g)
	}
	sort.SliceStable(out.Deleting, func(i, j int) bool { return out.Deleting[i].Parent < out.Deleting[j].Parent })
	out.DurationMS = shared.Millis(elapsed)
	if elapsed > 0 {
		out.EntriesPerSecond = float64(int64(float64(out.Entries) / elapsed.Seconds()))
	}
	switch {
	case s.stopped != "":
		out.Status = layout.DirShapeBudget
		out.CountsAreLowerBounds = true
		out.StopReason = s.stopped + ": every count is a lower bound"
	case s.cuts > 0 || s.counted > 0:
		out.Status = layout.DirShapeComplete
		out.CountsAreLowerBounds = true
		out.StopReason = s.firstCut
		if s.cuts > 1 {
			out.StopReason += fmt.Sprintf(" (and %d more huge directories left the same way)", s.cuts-1)
		}
		if s.counted > 0 {
			if out.StopReason != "" {
				out.StopReason += "; "
			}
			out.StopReason += fmt.Sprintf("%d subdirectories of huge directories were counted but not entered, so what they hold is not counted", s.counted)
		}
		if out.Unreadable > 0 || out.DepthLimited > 0 {
			out.StopReason += fmt.Sprintf("; %d directories could not be read and %d were too deep to enter", out.Unreadable, out.DepthLimited)
		}
	case out.Unreadable > 0 || out.DepthLimited > 0:
		out.Status = layout.DirShapeComplete
		out.CountsAreLowerBounds = true
		out.StopReason = fmt.Sprintf("%d directories could not be read and %d were too deep to enter: counts below them are missing", out.Unreadable, out.DepthLimited)
	default:
		out.Status = layout.DirShapeComplete
		out.Complete = true
	}
}
