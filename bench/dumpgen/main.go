// Command dumpgen writes the dump of a synthetic volume (see
// dumptest.Generate) to stdout, for the dump and load benchmark
// (bench/dumpload.sh).
//
//	go run ./bench/dumpgen -files 1100000 > synthetic.json
package main

import (
	"flag"
	"log"
	"os"

	"github.com/sluicefs/sluice/internal/dump/dumptest"
)

func main() {
	files := flag.Int("files", 100_000, "regular files")
	perDir := flag.Int("per-dir", 1000, "entries per directory")
	links := flag.Int("links", 1000, "extra hard-link names")
	flag.Parse()
	if err := dumptest.Generate(os.Stdout, dumptest.GenOptions{Files: *files, PerDir: *perDir, Links: *links}); err != nil {
		log.Fatal(err)
	}
}
