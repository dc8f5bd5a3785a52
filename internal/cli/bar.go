package cli

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

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
	fi, err := os.Stderr.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &byteBar{}
	}
	b := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionFullWidth(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetDescription(verb),
	)
	return &byteBar{bar: b, verb: verb}
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
