package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sizeValue is a byte size flag: a plain number counts in unit bytes
// (KiB for --block-size, as JuiceFS users type it), and a suffix K, M, G,
// T (powers of 1024, optional "i" and "B") names the unit explicitly.
type sizeValue struct {
	bytes *int64
	unit  int64
}

func (s sizeValue) String() string {
	if s.bytes == nil {
		return ""
	}
	return formatSize(*s.bytes)
}

func (s sizeValue) Set(v string) error {
	n, err := parseSize(v, s.unit)
	if err != nil {
		return err
	}
	*s.bytes = n
	return nil
}

func (s sizeValue) Type() string { return "size" }

func parseSize(v string, unit int64) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(v))
	mult := unit
	if rest, ok := strings.CutSuffix(t, "IB"); ok {
		t = rest
	} else if rest, ok := strings.CutSuffix(t, "B"); ok {
		t, mult = rest, 1
	}
	if t != "" {
		if i := strings.IndexByte("KMGT", t[len(t)-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q (examples: 4M, 512K, 1G)", v)
	}
	return int64(n * float64(mult)), nil
}

func formatSize(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return strconv.FormatInt(n, 10)
}

// secondsValue is a duration flag that also accepts plain seconds
// ("1", "0.5"), the form JuiceFS users type for cache timeouts.
type secondsValue struct{ d *time.Duration }

func (s secondsValue) String() string {
	if s.d == nil {
		return ""
	}
	return s.d.String()
}

func (s secondsValue) Set(v string) error {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f < 0 {
			return fmt.Errorf("negative duration %q", v)
		}
		*s.d = time.Duration(f * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("invalid duration %q (examples: 1, 0.5, 2s, 100ms)", v)
	}
	*s.d = d
	return nil
}

func (s secondsValue) Type() string { return "duration" }
