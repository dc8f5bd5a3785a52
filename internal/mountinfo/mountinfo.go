// Package mountinfo reads the kernel's table of this process's mounts,
// /proc/self/mountinfo: which file system is mounted where, so that
// commands can tell a Sluice mount from the directory under it or from
// another file system.
package mountinfo

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Mount is one line of the table.
type Mount struct {
	Point  string // where it is mounted
	FSType string // "fuse.sluice" for a Sluice mount
	Source string // "sluice:NAME" for a Sluice mount
	Dev    string // its device number, "MAJOR:MINOR", as stat reports it
}

// SluiceVolume reports whether m is a Sluice mount, and its volume's name.
// A mount made without a subtype shows as plain "fuse".
func (m Mount) SluiceVolume() (string, bool) {
	name, named := strings.CutPrefix(m.Source, "sluice:")
	if m.FSType == "fuse.sluice" || named && strings.HasPrefix(m.FSType, "fuse") {
		return name, true
	}
	return "", false
}

// Parse reads a table in the format of /proc/self/mountinfo, in its
// order; lines it cannot read are left out.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, x := range fields {
			if x == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || sep+2 >= len(fields) {
			continue
		}
		out = append(out, Mount{Point: unescape(fields[4]), FSType: fields[sep+1], Source: unescape(fields[sep+2]), Dev: fields[2]})
	}
	return out, sc.Err()
}

// Read reads this process's table.
func Read() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("list mounts: %w", err)
	}
	defer f.Close()
	return Parse(f)
}

// At returns the mount whose mount point is path (absolute, links
// resolved): the last mounted there, which hides the others.
func At(path string) (Mount, bool) {
	ms, err := Read()
	if err != nil {
		return Mount{}, false
	}
	return at(ms, path)
}

func at(ms []Mount, path string) (Mount, bool) {
	var m Mount
	found := false
	for _, x := range ms {
		if x.Point == path {
			m, found = x, true
		}
	}
	return m, found
}

// Containing returns the mount that path (absolute, links resolved) lies
// on: the one with the longest mount point that holds it, the last
// mounted of equals.
func Containing(path string) (Mount, bool) {
	ms, err := Read()
	if err != nil {
		return Mount{}, false
	}
	return containing(ms, path)
}

func containing(ms []Mount, path string) (Mount, bool) {
	var best Mount
	found := false
	for _, m := range ms {
		if m.Point != "/" && path != m.Point && !strings.HasPrefix(path, m.Point+"/") {
			continue
		}
		if !found || len(m.Point) >= len(best.Point) {
			best, found = m, true
		}
	}
	return best, found
}

// unescape decodes the octal escapes (\040 for a space) of the table.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
