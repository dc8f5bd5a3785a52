package fault

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvVar names the environment variable that FromEnv reads, so a test can
// turn faults on in a separate process such as a mount built with the
// faultinject tag.
const EnvVar = "SLUICE_FAULTS"

// Op names one Store operation.
type Op int

// The operations faults can be configured for.
const (
	Get Op = iota
	Put
	Head
	List
	Delete
	numOps
)

var opNames = [numOps]string{"get", "put", "head", "list", "delete"}

// String returns the lower-case name of the operation, as used in the
// configuration string.
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("op(%d)", int(o))
	}
	return opNames[o]
}

// Ops returns every operation, in the order of the constants.
func Ops() []Op {
	return []Op{Get, Put, Head, List, Delete}
}

// Rule configures the faults of one operation. The checks run in the order
// of the fields: the delay first, then FailNext, Hang, Err, and for Get,
// once the inner store has answered, Short and ReadErr.
type Rule struct {
	// Err is the probability (0..1) that a call fails with an injected
	// transient *Error before reaching the inner store.
	Err float64
	// FailNext makes the next FailNext calls fail with an injected *Error.
	FailNext int
	// Hang is the probability (0..1) that a call hangs before reaching the
	// inner store.
	Hang float64
	// HangFor is how long a hanging call hangs before it fails with an
	// injected timeout *Error. Zero hangs until the context is done and
	// returns the context's error.
	HangFor time.Duration
	// Delay is added to every call, before any other check; the call
	// returns early with the context's error if it is done first.
	Delay time.Duration
	// Short is the probability (0..1) that a Get reader returns fewer
	// bytes than the object holds and then io.ErrUnexpectedEOF.
	Short float64
	// ReadErr is the probability (0..1) that a Get reader fails midway
	// through the object with an injected transient *Error.
	ReadErr float64
}

// Config is the fault configuration of a Store.
type Config struct {
	// Seed seeds the random generator that decides which calls fail, so
	// a single-threaded test sees the same faults on every run.
	Seed uint64
	// Rules maps each operation to its faults; a missing operation has
	// none.
	Rules map[Op]Rule
}

// Validate reports an error if a probability is outside 0..1, a count or
// a duration is negative, or an operation is unknown.
func (c Config) Validate() error {
	for op, r := range c.Rules {
		if op < 0 || op >= numOps {
			return fmt.Errorf("fault: unknown operation %d", int(op))
		}
		for _, p := range []struct {
			name string
			v    float64
		}{{"err", r.Err}, {"hang", r.Hang}, {"short", r.Short}, {"readerr", r.ReadErr}} {
			if !(p.v >= 0 && p.v <= 1) {
				return fmt.Errorf("fault: %s:%s=%v is not a probability between 0 and 1", op, p.name, p.v)
			}
		}
		if r.FailNext < 0 || r.HangFor < 0 || r.Delay < 0 {
			return fmt.Errorf("fault: %s: negative fail, hangfor or delay", op)
		}
		if op != Get && (r.Short != 0 || r.ReadErr != 0) {
			return fmt.Errorf("fault: %s: short and readerr apply to get only", op)
		}
	}
	return nil
}

// String returns c in the format Parse reads, with operations and settings
// in a fixed order and zero settings left out.
func (c Config) String() string {
	var items []string
	if c.Seed != 0 {
		items = append(items, "seed="+strconv.FormatUint(c.Seed, 10))
	}
	for _, op := range Ops() {
		r := c.Rules[op]
		add := func(name, value string) { items = append(items, op.String()+":"+name+"="+value) }
		float := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
		if r.Err != 0 {
			add("err", float(r.Err))
		}
		if r.FailNext != 0 {
			add("fail", strconv.Itoa(r.FailNext))
		}
		if r.Hang != 0 {
			add("hang", float(r.Hang))
		}
		if r.HangFor != 0 {
			add("hangfor", r.HangFor.String())
		}
		if r.Delay != 0 {
			add("delay", r.Delay.String())
		}
		if r.Short != 0 {
			add("short", float(r.Short))
		}
		if r.ReadErr != 0 {
			add("readerr", float(r.ReadErr))
		}
	}
	return strings.Join(items, ",")
}

// Parse reads a configuration string: comma-separated items, each either
// "seed=N" or "OP:NAME=VALUE", where OP is get, put, head, list, delete or
// all (every operation), and NAME is one of
//
//	err=P        probability of an injected error
//	fail=N       fail the next N calls
//	hang=P       probability of a hanging call
//	hangfor=D    how long a call hangs before a timeout error (default: until the context is done)
//	delay=D      latency added to every call
//	short=P      get only: probability of a short read ending in io.ErrUnexpectedEOF
//	readerr=P    get only: probability of an error in the middle of the object
//
// P is a probability between 0 and 1, N a count and D a Go duration
// ("50ms"). Spaces around items are ignored and the empty string means no
// faults. Example: "seed=7,get:err=0.2,get:short=0.1,put:delay=50ms".
func Parse(s string) (Config, error) {
	var c Config
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if err := c.parseItem(item); err != nil {
			return Config{}, fmt.Errorf("fault: parse %q: %w", item, err)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// parseItem applies one "seed=N" or "OP:NAME=VALUE" item to c.
func (c *Config) parseItem(item string) error {
	lhs, value, ok := strings.Cut(item, "=")
	if !ok {
		return errors.New("want NAME=VALUE")
	}
	value = strings.TrimSpace(value)
	lhs = strings.TrimSpace(lhs)
	if lhs == "seed" {
		seed, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return fmt.Errorf("seed: %w", err)
		}
		c.Seed = seed
		return nil
	}
	opName, name, ok := strings.Cut(lhs, ":")
	if !ok {
		return errors.New(`want "seed=N" or "OP:NAME=VALUE"`)
	}
	var ops []Op
	if opName == "all" {
		ops = Ops()
		if name == "short" || name == "readerr" {
			ops = []Op{Get}
		}
	} else {
		i := slices.Index(opNames[:], opName)
		if i < 0 {
			return fmt.Errorf("unknown operation %q (want get, put, head, list, delete or all)", opName)
		}
		ops = []Op{Op(i)}
	}
	if c.Rules == nil {
		c.Rules = make(map[Op]Rule)
	}
	for _, op := range ops {
		r := c.Rules[op]
		if err := r.set(name, value); err != nil {
			return err
		}
		c.Rules[op] = r
	}
	return nil
}

// set parses value into the setting called name.
func (r *Rule) set(name, value string) error {
	var err error
	switch name {
	case "err":
		r.Err, err = strconv.ParseFloat(value, 64)
	case "fail":
		r.FailNext, err = strconv.Atoi(value)
	case "hang":
		r.Hang, err = strconv.ParseFloat(value, 64)
	case "hangfor":
		r.HangFor, err = time.ParseDuration(value)
	case "delay":
		r.Delay, err = time.ParseDuration(value)
	case "short":
		r.Short, err = strconv.ParseFloat(value, 64)
	case "readerr":
		r.ReadErr, err = strconv.ParseFloat(value, 64)
	default:
		return fmt.Errorf("unknown setting %q (want err, fail, hang, hangfor, delay, short or readerr)", name)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// FromEnv parses the SLUICE_FAULTS environment variable. ok is false when
// the variable is unset or empty.
func FromEnv() (c Config, ok bool, err error) {
	s := os.Getenv(EnvVar)
	if strings.TrimSpace(s) == "" {
		return Config{}, false, nil
	}
	c, err = Parse(s)
	if err != nil {
		return Config{}, false, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return c, true, nil
}
