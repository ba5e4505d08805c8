package procfs

import "strings"

// ParseCmdline splits /proc/<pid>/cmdline into arguments. It returns nil
// for an empty file (kernel threads and zombies have no command line).
//
// The arguments are NUL-terminated, but a process may have rewritten its
// argument area (setproctitle: "nginx: master process /usr/sbin/nginx",
// "postgres: checkpointer"), which leaves one string with spaces, often
// padded with NULs. So: trailing NULs are dropped (a genuine trailing empty
// argument is lost with them; a padded title would otherwise produce
// hundreds of empty ones), a missing final NUL is accepted, and when no NUL
// separates anything the text is split at spaces, as ps shows it. Empty
// arguments between NULs are kept.
func ParseCmdline(data []byte) []string {
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	if end == 0 {
		return nil
	}
	s := string(data[:end]) // one copy; the arguments slice it
	if !strings.Contains(s, "\x00") {
		if f := strings.Fields(s); len(f) > 0 {
			return f
		}
		// Only whitespace: keep it rather than claim there is no command.
		return []string{s}
	}
	return strings.Split(s, "\x00")
}
