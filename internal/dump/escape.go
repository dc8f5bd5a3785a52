package dump

import (
	"unicode/utf8"
)

const upperHex = "0123456789ABCDEF"

// appendEscaped appends name as the dump format writes names, symlink
// targets and xattr values: every byte that is not part of valid UTF-8,
// or is <= 0x20, or is one of % " \, as %XX with uppercase hex; the rest
// as it is. The result is valid UTF-8 that needs no JSON escape.
func appendEscaped(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		c := name[i]
		if c < utf8.RuneSelf {
			if c <= 0x20 || c == '%' || c == '"' || c == '\\' {
				dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			i++
			continue
		}
		dst = append(dst, name[i:i+n]...)
		i += n
	}
	return dst
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescape reverses appendEscaped: %XX with two uppercase hex digits
// becomes that byte, and any other % stays as it is.
func unescape(s string) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				out = append(out, hi<<4|lo)
				i += 2
				continue
			}
		}
		out = append(out, c)
	}
	return out
}
