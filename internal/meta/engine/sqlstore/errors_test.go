package sqlstore

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sluicefs/sluice/internal/meta/store"
)

func TestTablePrefix(t *testing.T) {
	for _, c := range []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"vol1_", true},
		{"_x", true},
		{"1x_", false},
		{"x;drop", false},
		{"a-b", false},
		{"x y", false},
		{`x"`, false},
		{strings.Repeat("a", 40), true},
		{strings.Repeat("a", 41), false},
	} {
		got, err := TablePrefix(c.prefix)
		if (err == nil) != c.ok || (c.ok && got != c.prefix) {
			t.Errorf("TablePrefix(%q) = %q, %v; want ok %v", c.prefix, got, err, c.ok)
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
