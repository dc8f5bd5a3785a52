package accesslog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// collect receives batches until it has n lines, and returns them with
// the batches' sizes.
func collect(t *testing.T, batches <-chan []string, done <-chan error, n int) (lines []string, sizes []int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for len(lines) < n {
		select {
		case b := <-batches:
			lines = append(lines, b...)
			sizes = append(sizes, len(b))
		case err := <-done:
			t.Fatalf("Follow returned %v after %q", err, lines)
		case <-timeout:
			t.Fatalf("only %q after 10 s", lines)
		}
	}
	return lines, sizes
}

// TestFollowReopens follows an access log that ends twice, the way
// .accesslog of a mount ends after a quiet second: a FIFO stands for it,
// and each writer that closes it ends one reading.
func TestFollowReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".accesslog")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	batches := make(chan []string, 16)
	done := make(chan error, 1)
	go func() {
		first, err := os.Open(path) // waits for the first writer
		if err != nil {
			done <- err
			return
		}
		done <- Follow(ctx, first, path, batches)
	}()
	// write opens the FIFO for writing, which waits for a reader, and
	// writes text.
	write := func(text string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}

	// The first reading ends in an unfinished line, which comes as a
	// batch of its own once the reading ended: the next writer meets
	// a reader that opened the log again.
	write(strings.Join(replayLines[:4], "\n") + "\n2026.11.26 14:33:36.5")
	lines, sizes := collect(t, batches, done, 5)
	if want := append(replayLines[:4:4], "2026.11.26 14:33:36.5"); fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("first reading: %q, want %q", lines, want)
	}
	if sizes[len(sizes)-1] != 1 {
		t.Errorf("the unfinished line came in a batch of %d", sizes[len(sizes)-1])
	}
	write(strings.Join(replayLines[4:], "\n") + "\n")
	if lines, _ := collect(t, batches, done, 4); fmt.Sprint(lines) != fmt.Sprint(replayLines[4:]) {
		t.Errorf("second reading: %q, want %q", lines, replayLines[4:])
	}

	// Follow ends with ctx; it may be waiting in an open of the FIFO,
	// which a writer ends.
	cancel()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Follow after cancel = %v, want context.Canceled", err)
			}
			return
		case <-timeout:
			t.Fatal("Follow did not return after cancel")
		case <-time.After(time.Millisecond):
			if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	}
}

func TestFollowFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	boom := errors.New("boom")
	tests := []struct {
		name    string
		first   io.Reader
		batches []string
		want    string
	}{
		{"reopen", strings.NewReader("a\nb\nc"), []string{"[a b]", "[c]"}, "reopen the access log: open " + missing + ": no such file or directory"},
		{"read", &failingReader{"a\nb\n", boom}, []string{"[a b]"}, "read " + missing + ": boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batches := make(chan []string, 16)
			err := Follow(context.Background(), io.NopCloser(tt.first), missing, batches)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Follow = %v, want %q", err, tt.want)
			}
			close(batches)
			var got []string
			for b := range batches {
				got = append(got, fmt.Sprint(b))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.batches) {
				t.Errorf("batches %q, want %q", got, tt.batches)
			}
		})
	}
}

// TestFollowCancelled: cancelling ctx stops a read in progress.
func TestFollowCancelled(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Follow(ctx, r, "/nonexistent", make(chan []string)) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Follow did not return after cancel")
	}
}
