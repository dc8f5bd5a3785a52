package cli

import (
	"bytes"
	"testing"

	"github.com/sluicefs/sluice/internal/control"
)

// summaryTree is a summary as the mount returns it: top holds big, a
// (with x) and two more entries summed as "...".
func summaryTree() *control.SummaryNode {
	return &control.SummaryNode{Dir: true, Totals: control.Totals{Files: 4, Dirs: 3, Length: 3 << 20}, Children: []*control.SummaryNode{
		{Path: "big", Totals: control.Totals{Files: 1, Length: 2 << 20}},
		{Path: "a", Dir: true, Totals: control.Totals{Files: 1, Dirs: 1, Length: 1000}, Children: []*control.SummaryNode{
			{Path: "a/x", Totals: control.Totals{Files: 1, Length: 1000}},
		}},
		{Path: "...", Others: 2, Totals: control.Totals{Files: 2, Dirs: 1, Length: 5}},
	}}
}

func TestSummaryTable(t *testing.T) {
	var b bytes.Buffer
	if err := writeSummaryTable(&b, summaryRows("/mnt/v/", summaryTree())); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"PATH                    SIZE  FILES  DIRS\n" +
		"/mnt/v/              3.0 MiB      4     3\n" +
		"/mnt/v/big           2.0 MiB      1     0\n" +
		"/mnt/v/a/             1000 B      1     1\n" +
		"/mnt/v/a/x            1000 B      1     0\n" +
		"/mnt/v/... (2 more)      5 B      2     1\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSummaryCSV(t *testing.T) {
	var b bytes.Buffer
	if err := writeSummaryCSV(&b, summaryRows("v", summaryTree())); err != nil {
		t.Fatal(err)
	}
	want := "path,size,files,dirs\n" +
		"v/,3145728,4,3\n" +
		"v/big,2097152,1,0\n" +
		"v/a/,1000,1,1\n" +
		"v/a/x,1000,1,0\n" +
		"v/... (2 more),5,2,1\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSummaryOptions(t *testing.T) {
	tests := []struct {
		o  summaryOptions
		ok bool
	}{
		{summaryOptions{depth: 2, entries: 10}, true},
		{summaryOptions{depth: 0, entries: 1}, true},
		{summaryOptions{depth: -1, entries: 10}, false},
		{summaryOptions{depth: 2, entries: 0}, false},
		{summaryOptions{depth: 2, entries: 10, csv: true}, true},
		{summaryOptions{depth: 2, entries: 10, csv: true, json: true}, false},
	}
	for _, tt := range tests {
		if err := tt.o.validate(); (err == nil) != tt.ok {
			t.Errorf("validate(%+v) = %v, want ok %v", tt.o, err, tt.ok)
		}
	}
}
