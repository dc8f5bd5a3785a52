package fault_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object/fault"
)

func TestParse(t *testing.T) {
	all := func(r fault.Rule) map[fault.Op]fault.Rule {
		m := map[fault.Op]fault.Rule{}
		for _, op := range fault.Ops() {
			m[op] = r
		}
		return m
	}
	tests := []struct {
		in   string
		want fault.Config
	}{
		{"", fault.Config{}},
		{" , ", fault.Config{}},
		{"seed=7", fault.Config{Seed: 7}},
		{"get:err=0.2,put:delay=50ms,seed=7", fault.Config{Seed: 7, Rules: map[fault.Op]fault.Rule{
			fault.Get: {Err: 0.2}, fault.Put: {Delay: 50 * time.Millisecond},
		}}},
		{"get:short=0.1, get:readerr=0.05 ,get:fail=3", fault.Config{Rules: map[fault.Op]fault.Rule{
			fault.Get: {Short: 0.1, ReadErr: 0.05, FailNext: 3},
		}}},
		{"head:hang=1,head:hangfor=2s,list:err=1,delete:fail=2", fault.Config{Rules: map[fault.Op]fault.Rule{
			fault.Head: {Hang: 1, HangFor: 2 * time.Second}, fault.List: {Err: 1}, fault.Delete: {FailNext: 2},
		}}},
		{"all:err=0.5", fault.Config{Rules: all(fault.Rule{Err: 0.5})}},
		{"all:short=0.5", fault.Config{Rules: map[fault.Op]fault.Rule{fault.Get: {Short: 0.5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := fault.Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Parse = %+v, want %+v", got, tt.want)
			}
			// String writes what Parse reads back.
			again, err := fault.Parse(got.String())
			if err != nil {
				t.Fatalf("Parse(String() = %q): %v", got.String(), err)
			}
			if !reflect.DeepEqual(again, got) && !(len(got.Rules) == 0 && len(again.Rules) == 0) {
				t.Errorf("Parse(%q) = %+v, want %+v", got.String(), again, got)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"get", "NAME=VALUE"},
		{"err=0.1", "OP:NAME=VALUE"},
		{"seed=x", "seed"},
		{"stat:err=0.1", `unknown operation "stat"`},
		{"get:boom=1", `unknown setting "boom"`},
		{"get:err=x", "err"},
		{"get:err=1.5", "probability"},
		{"get:err=-0.1", "probability"},
		{"put:err=NaN", "probability"},
		{"put:delay=fast", "delay"},
		{"put:delay=-1s", "negative"},
		{"get:fail=-1", "negative"},
		{"put:short=0.1", "get only"},
		{"head:readerr=0.1", "get only"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := fault.Parse(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v, want one containing %q", tt.in, err, tt.want)
			}
		})
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(fault.EnvVar, "")
	if _, ok, err := fault.FromEnv(); ok || err != nil {
		t.Errorf("FromEnv with empty %s = ok %v, err %v; want not ok, no error", fault.EnvVar, ok, err)
	}
	t.Setenv(fault.EnvVar, "seed=3,put:fail=1")
	c, ok, err := fault.FromEnv()
	if !ok || err != nil || c.Seed != 3 || c.Rules[fault.Put].FailNext != 1 {
		t.Errorf("FromEnv = %+v, %v, %v; want seed 3 and put:fail=1", c, ok, err)
	}
	t.Setenv(fault.EnvVar, "put:fail=x")
	if _, _, err := fault.FromEnv(); err == nil || !strings.Contains(err.Error(), fault.EnvVar) {
		t.Errorf("FromEnv with a bad value: error %v, want one naming %s", err, fault.EnvVar)
	}
}
