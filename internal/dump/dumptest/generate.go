package dumptest

import (
	"bufio"
	"fmt"
	"io"
)

// GenOptions shape a synthetic volume.
type GenOptions struct {
	Files  int // regular files, each of one small slice
	PerDir int // entries per directory (default 1,000)
	Links  int // extra hard-link names, to files of the same directory
}

// Generate writes the dump of a synthetic volume: Files small files of
// one slice each in directories of PerDir entries under the root, and
// Links extra names for some of them. Load it to fill a store fast for a
// benchmark or a test.
func Generate(w io.Writer, o GenOptions) error {
	if o.PerDir <= 0 {
		o.PerDir = 1000
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	dirs := (o.Files + o.PerDir - 1) / o.PerDir
	fmt.Fprintf(bw, `{
  "Setting": {"Name": "synthetic", "UUID": "5b0c2c3e-9d7e-4f0a-8c4e-3f1e2d7a9b10", "Storage": "file", "Bucket": "/tmp/synthetic/", "BlockSize": 4096, "Compression": "none", "TrashDays": 0, "MetaVersion": 1},
  "Counters": {"usedSpace": 0, "usedInodes": 0, "nextInodes": 2, "nextChunk": 1, "nextSession": 1, "nextTrash": 0},
  "Sustained": [],
  "DelFiles": [],
  "FSTree": {
    "attr": {"inode":1,"type":"directory","mode":511,"uid":0,"gid":0,"atime":1700000000,"mtime":1700000000,"ctime":1700000000,"nlink":%d,"length":0},
    "entries": {`, 2+dirs)
	ino, slice := uint64(2), uint64(1)
	links := o.Links
	for d := range dirs {
		if d > 0 {
			bw.WriteString(",")
		}
		fmt.Fprintf(bw, "\n      \"d%07d\": {\n        \"attr\": {\"inode\":%d,\"type\":\"directory\",\"mode\":493,\"uid\":1000,\"gid\":1000,\"atime\":1700000000,\"mtime\":1700000000,\"ctime\":1700000000,\"nlink\":2,\"length\":0},\n        \"entries\": {", d, ino)
		ino++
		n := min(o.PerDir, o.Files-d*o.PerDir)
		first := ino
		for f := range n {
			if f > 0 {
				bw.WriteString(",")
			}
			size := 1000 + (ino*7919)%60000
			nlink := 1
			if links > 0 && f < 2 {
				nlink = 2
			}
			fmt.Fprintf(bw, "\n          \"f%07d\": {\n            \"attr\": {\"inode\":%d,\"type\":\"regular\",\"mode\":420,\"uid\":1000,\"gid\":1000,\"atime\":1700000000,\"mtime\":1700000001,\"ctime\":1700000002,\"nlink\":%d,\"length\":%d},\n            \"chunks\": [{\"index\":0,\"slices\":[{\"id\":%d,\"size\":%d,\"len\":%d}]}]\n          }", f, ino, nlink, size, slice, size, size)
			ino++
			slice++
		}
		// Extra names for the first file of the directory, sorting
		// after the files.
		for k := 0; k < 2 && links > 0 && n > 0; k++ {
			links--
			size := 1000 + (first*7919)%60000
			fmt.Fprintf(bw, ",\n          \"link%d\": {\n            \"attr\": {\"inode\":%d,\"type\":\"regular\",\"mode\":420,\"uid\":1000,\"gid\":1000,\"atime\":1700000000,\"mtime\":1700000001,\"ctime\":1700000002,\"nlink\":2,\"length\":%d},\n            \"chunks\": [{\"index\":0,\"slices\":[{\"id\":%d,\"size\":%d,\"len\":%d}]}]\n          }", k, first+uint64(k), size, slice-uint64(n)+uint64(k), size, size)
		}
		bw.WriteString("\n        }\n      }")
	}
	bw.WriteString("\n    }\n  }\n}\n")
	return bw.Flush()
}
