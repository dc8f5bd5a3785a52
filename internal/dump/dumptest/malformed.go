package dumptest

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/dump"
)

// minimal returns a small valid dump whose root holds entries.
func minimal(entries string) string {
	return `{
  "Setting": {"Name": "bad", "UUID": "0c131b7f-c11e-4a06-a988-1a74a3d74e89", "Storage": "file", "Bucket": "/tmp/bad/", "BlockSize": 4096, "TrashDays": 0, "MetaVersion": 1},
  "Counters": {"usedSpace": 0, "usedInodes": 0, "nextInodes": 10, "nextChunk": 10, "nextSession": 0, "nextTrash": 0},
  "Sustained": [],
  "DelFiles": [],
  "FSTree": {
    "attr": {"inode":1,"type":"directory","mode":511,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":0},
    "entries": {` + entries + `}
  }
}`
}

func file(name string, ino int, typ string) string {
	return `"` + name + `": {"attr": {"inode":` + itoa(ino) + `,"type":"` + typ + `","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":5},
	  "chunks": [{"index":0,"slices":[{"id":3,"size":5,"len":5}]}]}`
}

func dir(name string, ino int, entries string) string {
	return `"` + name + `": {"attr": {"inode":` + itoa(ino) + `,"type":"directory","mode":493,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":2,"length":0}, "entries": {` + entries + `}}`
}

func itoa(i int) string { return strconv.Itoa(i) }

func testMalformed(t *testing.T, newStore NewStore) {
	good := minimal(file("f", 2, "regular") + "," + dir("d", 3, file("g", 4, "regular")))
	cases := []struct {
		name, dump, want string
	}{
		{"truncated", good[:len(good)*3/4], "ends too early"},
		{"malformed JSON", strings.Replace(good, `"mode":493,`, `"mode":493,,`, 1), "bad dump at /d"},
		{"not a dump", `[1, 2, 3]`, "not a dump"},
		{"no settings", strings.Replace(good, `"Setting"`, `"Settings"`, 1), "no Setting"},
		{"no tree", strings.Replace(good, `"FSTree"`, `"Tree"`, 1), "no FSTree"},
		{"conflicting types", minimal(file("f", 2, "regular") + "," + `"s": {"attr": {"inode":2,"type":"fifo","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":0}}`), "inode 2 appears as a regular and as a fifo"},
		{"directory under a file", minimal(`"f": {"attr": {"inode":2,"type":"regular","mode":420,"uid":0,"gid":0,"atime":1,"mtime":1,"ctime":1,"nlink":1,"length":0}, "entries": {}}`), "a regular has entries"},
		{"directory twice", minimal(dir("d", 3, "") + "," + dir("e", 3, "")), "directory inode 3 appears twice"},
		{"long name", minimal(file(strings.Repeat("n", 300), 2, "regular")), "a name of 300 bytes"},
		{"slash in name", minimal(file("a/b", 2, "regular")), "a name with '/'"},
		{"unknown type", minimal(file("f", 2, "door")), `unknown type "door"`},
		{"negative size", strings.Replace(good, `"length":5`, `"length":-5`, 1), `attr "length"`},
		{"slice past its chunk", strings.Replace(good, `{"id":3,"size":5,"len":5}`, `{"id":3,"pos":67108860,"size":5,"len":5}`, 1), "runs past the 64 MiB chunk"},
		{"file past the largest size", strings.Replace(good, `"length":5`, `"length":144115188075855873`, 1), "past the largest file size"},
		{"chunk past the largest size", strings.Replace(good, `"index":0`, `"index":2147483648`, 1), "chunk 2147483648 is past the largest file size"},
		{"trailing garbage", good + "}", "after the dump"},
		{"bad settings", strings.Replace(good, `"Name": "bad"`, `"Name": "Bad Name!"`, 1), "invalid volume name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			_, err := dump.Load(ctx, st, strings.NewReader(c.dump), dump.LoadOptions{})
			if err == nil {
				t.Fatalf("loaded a bad dump")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			isEmpty(t, st)
		})
	}
	t.Run("good", func(t *testing.T) {
		st := newStore(t)
		rep := Load(t, st, []byte(good))
		if rep.Files != 2 || rep.Dirs != 2 {
			t.Fatalf("report %+v", rep)
		}
		b := Dump(t, st, dump.Options{})
		if !bytes.Contains(b, []byte(`"g"`)) {
			t.Fatalf("dump of the loaded volume:\n%s", b)
		}
	})
}
