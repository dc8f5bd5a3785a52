// Package accesslog reads the access log of a Sluice mount: the lines
// its internal file .accesslog shows, one per FUSE request, as
// internal/fuse writes them:
//
//	2026.11.26 14:30:15.581554 [uid:0,gid:0,pid:7393] create (1,"x",0644): OK (2,fh 3) <0.000564>
//
// that is the local time the request ended (to the microsecond), the
// caller, the operation, its arguments in parentheses (names quoted as Go
// strings, so a name may hold any byte), ": ", the result (OK or an errno
// name such as ENOENT) optionally followed by what the reply carried in
// parentheses, and the latency in seconds in angle brackets. Lines that
// start with '#' are comments, such as the note the mount writes when a
// slow reader lost lines ("#dropped N lines: the reader was too slow").
//
// Parse reads one line; Profile adds up the lines per operation, as
// `sluice profile` shows them: Profile.Replay a copy of the log saved
// earlier, interval by interval of the log's time, and Follow the lines
// of a live mount's .accesslog as they come. Printing the figures is the
// command's business.
package accesslog

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the layout of the time that starts each line, in the
// mount's local time zone.
const TimeLayout = "2006.01.02 15:04:05.000000"

// Entry is one request of the access log.
type Entry struct {
	Time          time.Time // when the request ended, in the local time zone
	HasCaller     bool      // the line names the caller: Uid, Gid and Pid are set
	Uid, Gid, Pid uint32
	Op            string        // the operation: lookup, getattr, read, ...
	Args          string        // the arguments, as logged between the parentheses
	Result        string        // "OK" or the errno's name ("ENOENT")
	Reply         string        // what the reply carried, without its parentheses; "" for nothing
	Latency       time.Duration // how long the mount took to answer
}

// ErrComment is the error of Parse for a comment line (one starting with
// '#') or an empty one: a line that is not a request but not damaged
// either.
var ErrComment = errors.New("comment line")

// SyntaxError is the error of Parse for a line that is not in the access
// log's format.
type SyntaxError struct {
	Line string // the line, cut to 100 bytes
	Msg  string // what is wrong
}

// Error returns the line and what is wrong with it.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("access log line %q: %s", e.Line, e.Msg)
}

func syntaxError(line, msg string) error {
	if len(line) > 100 {
		line = line[:100] + "..."
	}
	return &SyntaxError{Line: line, Msg: msg}
}

// Parse parses one line of the access log, with or without its newline.
// It returns ErrComment for a comment or an empty line, and a
// *SyntaxError for a line that does not parse.
func Parse(line string) (Entry, error) {
	line = strings.TrimRight(line, "\r\n")
	if line == "" || line[0] == '#' {
		return Entry{}, ErrComment
	}
	var e Entry
	orig := line
	if len(line) < len(TimeLayout)+1 || line[len(TimeLayout)] != ' ' {
		return e, syntaxError(orig, "no time at the start")
	}
	t, err := time.ParseInLocation(TimeLayout, line[:len(TimeLayout)], time.Local)
	if err != nil {
		return e, syntaxError(orig, "bad time: "+err.Error())
	}
	e.Time = t
	line = line[len(TimeLayout)+1:]

	// The latency ends the line: " <0.000564>".
	i := strings.LastIndex(line, " <")
	if i < 0 || !strings.HasSuffix(line, ">") {
		return e, syntaxError(orig, "no latency at the end")
	}
	secs, err := strconv.ParseFloat(line[i+2:len(line)-1], 64)
	if err != nil || secs < 0 || math.IsInf(secs, 0) || math.IsNaN(secs) {
		return e, syntaxError(orig, "bad latency")
	}
	e.Latency = time.Duration(math.Round(secs * 1e9))
	line = line[:i]

	if strings.HasPrefix(line, "[") {
		head, rest, ok := strings.Cut(line, "] ")
		if !ok {
			return e, syntaxError(orig, "unterminated caller")
		}
		if err := e.parseCaller(head[1:]); err != nil {
			return e, syntaxError(orig, err.Error())
		}
		line = rest
	}

	op, rest, ok := strings.Cut(line, " (")
	if !ok || op == "" || strings.ContainsAny(op, " ()[]") {
		return e, syntaxError(orig, "no operation")
	}
	e.Op = op
	n, err := argsEnd(rest)
	if err != nil {
		return e, syntaxError(orig, err.Error())
	}
	e.Args = rest[:n]
	rest = rest[n+len("): "):]

	result, reply, _ := strings.Cut(rest, " ")
	if result == "" || strings.ContainsAny(result, "()") {
		return e, syntaxError(orig, "no result")
	}
	e.Result = result
	if reply != "" {
		if len(reply) < 2 || reply[0] != '(' || reply[len(reply)-1] != ')' {
			return e, syntaxError(orig, "bad reply")
		}
		e.Reply = reply[1 : len(reply)-1]
	}
	return e, nil
}

// parseCaller parses "uid:0,gid:0,pid:7393".
func (e *Entry) parseCaller(s string) error {
	fields := strings.Split(s, ",")
	if len(fields) != 3 {
		return errors.New("bad caller")
	}
	dst := []*uint32{&e.Uid, &e.Gid, &e.Pid}
	for i, key := range []string{"uid:", "gid:", "pid:"} {
		v, ok := strings.CutPrefix(fields[i], key)
		if !ok {
			return errors.New("bad caller: no " + key)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return errors.New("bad caller: " + key + " " + v)
		}
		*dst[i] = uint32(n)
	}
	e.HasCaller = true
	return nil
}

// argsEnd returns where the arguments in s end: the index of the ')'
// that closes them, followed by ": ". Quoted names may hold anything,
// "): " included.
func argsEnd(s string) (int, error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			n, err := quotedLen(s[i:])
			if err != nil {
				return 0, err
			}
			i += n - 1
		case ')':
			if strings.HasPrefix(s[i:], "): ") {
				return i, nil
			}
		}
	}
	return 0, errors.New("unterminated arguments")
}

// quotedLen returns the length of the Go quoted string that starts s.
func quotedLen(s string) (int, error) {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated quoted name")
}

// Dropped reports whether line is the mount's note that it dropped
// lines for a slow reader, and how many.
func Dropped(line string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, "#dropped ")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, " ")
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
