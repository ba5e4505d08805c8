package csi

import (
	"strings"

	"golang.org/x/sys/unix"
)

// How the csi collector names what getdents says an entry is.

func csiTypeName(name string, t uint8) string {
	switch t {
	case unix.DT_DIR:
		return "dir"
	case unix.DT_REG:
		if strings.HasSuffix(name, ".json") {
			return "json"
		}
		return "file"
	case unix.DT_SOCK:
		return "socket"
	case unix.DT_LNK:
		return "symlink"
	case unix.DT_UNKNOWN:
		return "unknown"
	}
	return "other"
}
