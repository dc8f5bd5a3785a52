package accesslog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// Follow reads the access log of a live mount, its internal file
// .accesslog at path, and sends its lines in batches, without their
// newlines, as they come. The caller opens the log first and passes it
// as first, so that it hears at once when it may not read it (only root
// may).
//
// A reading of .accesslog ends after a quiet second: at the end of the
// file Follow sends what is left of an unfinished line as a line of its
// own (it then counts as one that does not parse) and opens the log
// again. It returns ctx.Err() once ctx ends, closing the log to stop a
// read in progress, and an error when the log cannot be opened again or
// read. first is closed when Follow returns.
func Follow(ctx context.Context, first io.ReadCloser, path string, batches chan<- []string) error {
	f := first
	buf := make([]byte, 256<<10)
	for {
		stop := context.AfterFunc(ctx, func() { f.Close() })
		var partial []byte
		for {
			n, err := f.Read(buf)
			if n > 0 {
				data := append(partial, buf[:n]...)
				i := bytes.LastIndexByte(data, '\n')
				if i < 0 {
					partial = data
					continue
				}
				partial = append([]byte(nil), data[i+1:]...)
				lines := strings.Split(string(data[:i]), "\n")
				select {
				case batches <- lines:
				case <-ctx.Done():
				}
			}
			if err == io.EOF || n == 0 && err == nil {
				break
			}
			if err != nil {
				stop()
				f.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("read %s: %w", path, err)
			}
		}
		stop()
		f.Close()
		if len(partial) > 0 {
			// A line never ends only at the end of the file; keep what
			// came so that it counts as a line that does not parse.
			select {
			case batches <- []string{string(partial)}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("reopen the access log: %w", err)
		}
		f = next
	}
}
