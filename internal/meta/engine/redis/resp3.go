package redis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The invalidation connection (see watch.go) speaks RESP3 itself: it
// needs the push messages of CLIENT TRACKING interleaved, in stream
// order, with the replies to its own commands, which go-redis's pooled
// connections do not expose. Only what that connection sends and
// receives is implemented.

// respPush is a RESP3 push message (">"), such as an invalidation.
type respPush []any

// respError is an error reply ("-" or "!").
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// maxRespLen bounds the length of one bulk string or aggregate, so that a
// garbled stream fails instead of allocating without limit.
const maxRespLen = 512 << 20

// readResp reads one RESP3 value: nil for a null, []byte for a bulk or
// verbatim string, string for a simple string, int64, respError, []any
// for arrays, sets and maps (maps flattened to key, value, ...), and
// respPush. Attributes are skipped; doubles, booleans and big numbers
// come back as their text.
func readResp(r *bufio.Reader) (any, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("redis: malformed reply line %q", line)
	}
	kind, body := line[0], string(line[1:len(line)-2])
	switch kind {
	case '+', ',', '(', '#':
		return body, nil
	case '-':
		return respError(body), nil
	case ':':
		n, err := strconv.ParseInt(body, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis: malformed integer %q", body)
		}
		return n, nil
	case '_':
		return nil, nil
	case '$', '=', '!':
		n, err := respLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		buf = buf[:n]
		switch kind {
		case '=':
			if len(buf) >= 4 {
				buf = buf[4:] // "txt:" or "mkd:"
			}
		case '!':
			return respError(buf), nil
		}
		return buf, nil
	case '*', '~', '>', '%', '|':
		n, err := respLen(body)
		if err != nil || n < 0 {
			return nil, err
		}
		if kind == '%' || kind == '|' {
			n *= 2
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readResp(r); err != nil {
				return nil, err
			}
		}
		switch kind {
		case '>':
			return respPush(out), nil
		case '|':
			return readResp(r) // the value the attribute describes
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unknown reply type %q", kind)
}

// respLen parses the length of a bulk string or aggregate (-1: null).
func respLen(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < -1 || n > maxRespLen {
		return 0, fmt.Errorf("redis: malformed length %q", s)
	}
	return n, nil
}

// appendCommand appends args as a RESP command (an array of bulk strings).
func appendCommand(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// errRespType reports a reply of an unexpected type.
var errRespType = errors.New("redis: unexpected reply type")
