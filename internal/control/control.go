// Package control is the protocol of a mount's control channel: the
// virtual file .control at the root of every Sluice mount, through which
// commands ask the running mount for work that is better done inside it
// (info, summary, warmup, rmr, compact, flush) than through one system
// call per file.
//
// A conversation is one open file description of .control:
//
//   - the client writes one request, a JSON object (Request) ended by a
//     newline;
//   - the mount runs it with the credentials of the process that wrote it,
//     and the client reads the reply: zero or more progress lines and one
//     last line, each a JSON object (Reply) ended by a newline; end of file
//     follows the last line.
//
// Closing the file early cancels the request. Call is the client.
package control

import (
	"encoding/json"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
)

// FileName is the name of the control file at the root of a mount.
const FileName = ".control"

// MaxRequest bounds the size of one request line.
const MaxRequest = 1 << 20

// Request asks a mount for work on inode Ino (a file or a tree, as the
// operation says) with the operation's own arguments.
type Request struct {
	Op   string          `json:"op"`
	Ino  meta.Ino        `json:"ino"`
	Args json.RawMessage `json:"args,omitempty"`
}

// Reply is one line of a reply: a progress report, or the last line with
// the result or the error (its message and errno, 0 when it is not a
// POSIX error).
type Reply struct {
	Progress json.RawMessage `json:"progress,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Errno    syscall.Errno   `json:"errno,omitempty"`
	Done     bool            `json:"done,omitempty"`
}
