package stats

// seconds returns the time between two samples.
func seconds(prev, cur *Sample) float64 { return cur.At.Sub(prev.At).Seconds() }

// delta returns how much a counter grew between two samples. A series
// the first sample lacks counts from 0 (the mount creates series at
// their first event); false when the second sample lacks it, or it went
// back (another process answers now).
func delta(prev, cur *Sample, family string, field Field, labels ...string) (float64, bool) {
	b, ok := cur.Value(family, field, labels...)
	a, _ := prev.Value(family, field, labels...)
	if !ok || b < a {
		return 0, false
	}
	return b - a, true
}

// rate is a counter's growth per second.
func rate(family string, field Field, labels ...string) Figure {
	return func(prev, cur *Sample) (float64, bool) {
		d, ok := delta(prev, cur, family, field, labels...)
		dt := seconds(prev, cur)
		if !ok || dt <= 0 {
			return 0, false
		}
		return d / dt, true
	}
}

// gauge is a gauge's value in the newer sample.
func gauge(family string, labels ...string) Figure {
	return func(_, cur *Sample) (float64, bool) { return cur.Value(family, FieldValue, labels...) }
}

// avgMillis is the average, in milliseconds, of the observations a
// histogram of seconds got between two samples; 0 without any.
func avgMillis(family string, labels ...string) Figure {
	return func(prev, cur *Sample) (float64, bool) {
		n, ok1 := delta(prev, cur, family, FieldCount, labels...)
		s, ok2 := delta(prev, cur, family, FieldSum, labels...)
		if !ok1 || !ok2 {
			return 0, false
		}
		if n == 0 {
			return 0, true
		}
		return 1000 * s / n, true
	}
}

// scaled multiplies f's figure by k.
func scaled(f Figure, k float64) Figure {
	return func(prev, cur *Sample) (float64, bool) {
		v, ok := f(prev, cur)
		return v * k, ok
	}
}

// cacheMisses is the block reads per second that waited for the object
// store.
func cacheMisses(prev, cur *Sample) (float64, bool) {
	return rate(famCacheMisses, FieldValue)(prev, cur)
}

// cacheHitRatio is hits/(hits+misses) in percent; 0 without reads.
func cacheHitRatio(prev, cur *Sample) (float64, bool) {
	h, ok1 := rate(famCacheHits, FieldValue)(prev, cur)
	m, ok2 := cacheMisses(prev, cur)
	if !ok1 || !ok2 {
		return 0, false
	}
	if h+m == 0 {
		return 0, true
	}
	return 100 * h / (h + m), true
}
