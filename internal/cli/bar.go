package cli

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// stderrIsTerminal reports whether progress may be drawn: stderr is a
// terminal. In scripts, commands show no progress.
func stderrIsTerminal() bool { return isTerminal(os.Stderr) }

// progress is a spinner with a line of text on stderr, for long work whose
// total is not known in advance (scans of gc, fsck, status --more,
// compact), drawn by the same library as byteBar when stderr is a
// terminal; otherwise it shows nothing.
type progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func newProgress() *progress {
	if !stderrIsTerminal() {
		return &progress{}
	}
	return &progress{bar: progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	)}
}

// show replaces the text beside the spinner.
func (p *progress) show(format string, args ...any) {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bar.Describe(fmt.Sprintf(format, args...))
	_ = p.bar.Add(1)
}

// done removes the spinner.
func (p *progress) done() {
	if p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.bar.Finish()
	_ = p.bar.Clear()
}

// byteBar is a progress bar on stderr for long work measured in bytes
// (dump and load), with a count of entries in its description. It shows
// nothing when stderr is not a terminal.
type byteBar struct {
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	verb string
}

// newByteBar starts a bar; total is the bytes expected, -1 when unknown.
func newByteBar(verb string, total int64) *byteBar {
	if !stderrIsTerminal() {
		return &byteBar{}
	}
	return &byteBar{bar: newBar(verb, total, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true)), verb: verb}
}

// set shows entries done and bytes done.
func (b *byteBar) set(entries, bytes int64) {
	if b.bar == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bar.Describe(fmt.Sprintf("%s %d entries", b.verb, entries))
	_ = b.bar.Set64(bytes)
}

// finish removes the bar.
func (b *byteBar) finish() {
	if b.bar == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Finish()
	_ = b.bar.Clear()
}

// newBar returns a bar on stderr of total units (-1: unknown), in the
// look every counted progress of the commands shares, with extra options.
func newBar(what string, total int64, extra ...progressbar.Option) *progressbar.ProgressBar {
	opts := append([]progressbar.Option{
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription(what),
	}, extra...)
	return progressbar.NewOptions64(total, opts...)
}

// countBar is a progress bar on stderr for work counted in operations. It
// shows nothing when stderr is not a terminal; add may be called from
// many goroutines.
type countBar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// newCountBar starts a bar of total operations described by what.
func newCountBar(what string, total int64) *countBar {
	if !stderrIsTerminal() {
		return &countBar{}
	}
	return &countBar{bar: newBar(what, total, progressbar.OptionShowCount())}
}

// add counts one operation done.
func (b *countBar) add() {
	if b.bar == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Add64(1)
}

// finish removes the bar.
func (b *countBar) finish() {
	if b.bar == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	_ = b.bar.Finish()
	_ = b.bar.Clear()
}
