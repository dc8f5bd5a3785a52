package sqlkv

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

func TestTableName(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"", "kv", true},
		{"vol1_", "vol1_kv", true},
		{"_x", "_xkv", true},
		{"1x_", "", false},
		{"x;drop", "", false},
		{"a-b", "", false},
		{"x y", "", false},
		{`x"`, "", false},
		{strings.Repeat("a", 41), "", false},
	} {
		got, err := TableName(c.prefix, "kv")
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("TableName(%q) = %q, %v; want %q, ok %v", c.prefix, got, err, c.want, c.ok)
		}
	}
}

func TestMarks(t *testing.T) {
	driverErr := errors.New("driver says no")
	if err := Conflict(driverErr); !errors.Is(err, store.ErrConflict) || !errors.Is(err, driverErr) {
		t.Errorf("Conflict: %v does not wrap both", err)
	}
	if err := NoTable(driverErr); !errors.Is(err, ErrNoTable) || !errors.Is(err, driverErr) {
		t.Errorf("NoTable: %v does not wrap both", err)
	}
	if err := Explain(driverErr, "clear words"); err.Error() != "clear words" || !errors.Is(err, driverErr) {
		t.Errorf("Explain: %q", err)
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
		Err: &net.AddrError{Err: syscall.ECONNREFUSED.Error()}}
	if got := describeNet(refused).Error(); !strings.HasPrefix(got, "cannot reach the server at 127.0.0.1:1: ") {
		t.Errorf("describeNet: %q", got)
	}
	if got := describeNet(driverErr); got != driverErr {
		t.Errorf("describeNet changed %v", got)
	}
}
