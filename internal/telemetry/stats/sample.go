// Package stats computes the live figures of a mount that `sluice stats`
// shows: it reads the mount's metrics, as its internal file .stats shows
// them in the Prometheus text format, into Samples, and derives from two
// samples taken an interval apart the rates, gauges and average
// latencies of the columns each schema letter names (Schema).
//
// A figure the mount does not report has no value: an older mount, a
// feature it lacks, or a series that has had no event yet (the mount
// creates most series at their first event). A counter missing from the
// first sample only counts from 0; one that went back (another process
// answers now) has no value.
//
// The package does not print: the command formats each figure by its
// Unit in a column, repeats the header, and times the readings. It knows
// the metric names of package telemetry and the layers that register
// theirs; docs/metrics.md lists them.
package stats

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one reading of a mount's metrics.
type Sample struct {
	// At is when the reading was taken.
	At       time.Time
	families map[string][]series
}

// series is one series of a family: a counter's, gauge's or untyped
// value, or a histogram's or summary's count and sum.
type series struct {
	labels     map[string]string
	value      float64
	count, sum float64
}

// ReadFile reads the metrics file at path, a mount's .stats. It takes no
// context: the mount answers a read of .stats from memory, and a read
// once made cannot be called off.
func ReadFile(path string) (*Sample, error) {
	at := time.Now()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stats: read the metrics of the mount (is it a Sluice mount?): %w", err)
	}
	s, err := Parse(b, at)
	if err != nil {
		return nil, fmt.Errorf("stats: %s: %w", path, err)
	}
	return s, nil
}

// Parse parses metrics in the Prometheus text format, read at time at.
func Parse(text []byte, at time.Time) (*Sample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	s := &Sample{At: at, families: make(map[string][]series, len(fams))}
	for name, mf := range fams {
		list := make([]series, 0, len(mf.GetMetric()))
		for _, m := range mf.GetMetric() {
			ss := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				ss.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				ss.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				ss.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				ss.value = m.GetUntyped().GetValue()
			case m.Histogram != nil:
				ss.count, ss.sum = float64(m.GetHistogram().GetSampleCount()), m.GetHistogram().GetSampleSum()
			case m.Summary != nil:
				ss.count, ss.sum = float64(m.GetSummary().GetSampleCount()), m.GetSummary().GetSampleSum()
			}
			list = append(list, ss)
		}
		s.families[name] = list
	}
	return s, nil
}

// Field is what Value reads of a series.
type Field int

const (
	FieldValue Field = iota // a counter's, gauge's or untyped value
	FieldCount              // a histogram's or summary's count
	FieldSum                // a histogram's or summary's sum
)

// Value returns the sum of field over the series of family whose labels
// match the name, value pairs of labels, and whether the family has any
// such series. A nil Sample has none.
func (s *Sample) Value(family string, field Field, labels ...string) (float64, bool) {
	if s == nil {
		return 0, false
	}
	sum, found := 0.0, false
	for _, ss := range s.families[family] {
		if !ss.matches(labels) {
			continue
		}
		found = true
		switch field {
		case FieldValue:
			sum += ss.value
		case FieldCount:
			sum += ss.count
		case FieldSum:
			sum += ss.sum
		}
	}
	return sum, found
}

// matches reports whether the series has the labels of the name, value
// pairs.
func (ss *series) matches(pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := ss.labels[pairs[i]]; !ok || v != pairs[i+1] {
			return false
		}
	}
	return true
}
