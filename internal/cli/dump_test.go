package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/dump/dumptest"
	"github.com/sluicefs/sluice/internal/meta/engine/sqlite"
)

// TestDumpLoadFiles runs the commands as a user types them: dump to a
// compressed file of each kind, load it back from the file and from
// standard input, and refuse a second load into the same engine.
func TestDumpLoadFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "src.db")
	st, err := sqlite.Open(ctx, src, true)
	if err != nil {
		t.Fatal(err)
	}
	dumptest.Fill(t, st)
	st.Close()

	for i, name := range []string{"meta.json", "meta.json.gz", "meta.json.zst"} {
		file := filepath.Join(dir, name)
		var out, errOut bytes.Buffer
		o := dumpOptions{}
		o.Threads = 4
		if err := runDump(ctx, &out, &errOut, "sqlite3://"+src, file, &o); err != nil {
			t.Fatalf("dump to %s: %v", name, err)
		}
		if !strings.Contains(errOut.String(), "dumped ") {
			t.Errorf("dump says %q", errOut.String())
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(left) > 0 {
			t.Errorf("dump left %v", left)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dst := "sqlite3://" + filepath.Join(dir, name+".db")
		var stdin io.Reader
		arg := file
		if i == 1 {
			stdin, arg = f, "-" // compressed, on standard input
		}
		var rep bytes.Buffer
		if err := runLoad(ctx, stdin, &rep, dst, arg, loadOptions{LoadOptions: dump.LoadOptions{Threads: 4}}); err != nil {
			t.Fatalf("load %s: %v", name, err)
		}
		if !strings.Contains(rep.String(), `loaded volume "dumpvol"`) || !strings.Contains(rep.String(), "usedInodes") {
			t.Errorf("load report:\n%s", rep.String())
		}
		err = runLoad(ctx, nil, &rep, dst, file, loadOptions{LoadOptions: dump.LoadOptions{Threads: 4}})
		if err == nil || !strings.Contains(err.Error(), "already holds a volume") {
			t.Errorf("a second load into %s: %v", dst, err)
		}
	}
	var out, errOut bytes.Buffer
	o := dumpOptions{}
	o.Threads = 4
	err = runDump(ctx, &out, &errOut, "sqlite3://"+filepath.Join(dir, "none.db"), filepath.Join(dir, "x.json"), &o)
	if err == nil {
		t.Fatalf("dump of an engine with no volume succeeded")
	}
	if _, serr := os.Stat(filepath.Join(dir, "x.json")); serr == nil {
		t.Errorf("a failed dump left its file")
	}
}
