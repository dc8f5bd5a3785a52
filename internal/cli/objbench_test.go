package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/file"
	"github.com/sluicefs/sluice/internal/object/objbench"
	"github.com/sluicefs/sluice/internal/testserver"
)

// tinyObjbench returns objbench options small enough for a unit test.
func tinyObjbench(storage string) *objbenchOptions {
	return &objbenchOptions{storage: storage, Options: objbench.Options{Threads: 3, BlockSize: 256 << 10,
		BigObjectSize: 1<<20 + 12345, SmallObjectSize: 3 << 10, SmallObjects: 25}}
}

// checkObjbenchOutput fails t unless out shows every functional check
// passing, a table row for every operation, and the cleanup.
func checkObjbenchOutput(t *testing.T, out string) {
	t.Helper()
	for _, c := range conformance.Checks(conformance.Config{}) {
		if !regexp.MustCompile(regexp.QuoteMeta(c.Doc) + ` +pass `).MatchString(out) {
			t.Errorf("check %q did not pass:\n%s", c.Doc, out)
		}
	}
	rows := []string{"put block", "get block", "ranged get", "put big object", "get big object",
		"put small object", "get small object", "head small object", "list small objects", "delete small object"}
	for _, op := range rows {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(op) + `.* [0-9.]+ (MiB|objects)/s +[0-9.]+ +[0-9.]+ *$`).MatchString(out) {
			t.Errorf("no table row for %q:\n%s", op, out)
		}
	}
	if !strings.Contains(out, "OPERATION") || !regexp.MustCompile(`Removed [1-9][0-9]* objects under objbench-[0-9a-f]+/`).MatchString(out) {
		t.Errorf("no table header or cleanup line:\n%s", out)
	}
}

func TestObjbenchFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bucket")
	var out bytes.Buffer
	if err := runObjbench(context.Background(), &out, dir, tinyObjbench("file")); err != nil {
		t.Fatalf("objbench: %v\n%s", err, out.String())
	}
	checkObjbenchOutput(t, out.String())
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("bucket after objbench = %v, %v; want it empty", entries, err)
	}
}

func TestObjbenchS3(t *testing.T) {
	url := testserver.URL(t, testserver.S3)
	var out bytes.Buffer
	// The keys come from the URL, as they may in `sluice objbench`.
	if err := runObjbench(context.Background(), &out, url, tinyObjbench("s3")); err != nil {
		t.Fatalf("objbench: %v\n%s", err, out.String())
	}
	checkObjbenchOutput(t, out.String())
	if strings.Contains(out.String(), strings.SplitN(strings.TrimPrefix(url, "http://"), "@", 2)[0]) {
		t.Errorf("objbench output shows the credentials:\n%s", out.String())
	}
}

// lyingStore reports every key as present: objbench must catch it.
type lyingStore struct{ object.Store }

func (s lyingStore) Head(ctx context.Context, key string) (object.Info, error) {
	info, err := s.Store.Head(ctx, key)
	if err != nil {
		return object.Info{Key: key}, nil
	}
	return info, nil
}

func TestObjbenchFailedCheck(t *testing.T) {
	dir := t.TempDir()
	fs, err := file.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = checkAndMeasure(context.Background(), &out, lyingStore{fs}, tinyObjbench("file"))
	if err == nil || !strings.Contains(err.Error(), "functional checks failed") {
		t.Fatalf("objbench on a store with a broken Head: error = %v, want failed checks\n%s", err, out.String())
	}
	for _, want := range []string{"missing keys are not found (get, head)", `FAIL: Head("missing") error = <nil>, want ErrNotFound`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "OPERATION") {
		t.Errorf("the benchmark ran after a failed check:\n%s", out.String())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("bucket after a failed objbench = %v, %v; want it empty", entries, err)
	}
}

func TestObjbenchFlags(t *testing.T) {
	cmd := newObjbench()
	dir := filepath.Join(t.TempDir(), "b")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--skip-functional-tests", "-p", "2", "--block-size", "64K", "--big-object-size", "256K",
		"--small-object-size", "1K", "--small-objects", "5", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("objbench: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "Functional checks") || !strings.Contains(out.String(), "2 threads, block size 64K, big object 256K, 5 small objects of 1K") {
		t.Errorf("flags not applied:\n%s", out.String())
	}
	cmd = newObjbench()
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"-p", "0", dir})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--threads") {
		t.Errorf("objbench -p 0: error = %v, want a --threads error", err)
	}
}
