// Package objbench is the engine of `sluice objbench`: it checks that an
// object store behaves as Sluice needs and measures it, in a random
// prefix of the store that it empties at the end.
//
// A Bench is one run on one store. New picks the prefix; Check runs the
// checks of package conformance (the ones every backend passes in the Go
// tests) against the real store, each in a fresh prefix; Measure times
// the requests Sluice makes: blocks, ranged reads of blocks, one big
// object, and small objects with head, list and delete, a number of
// requests at a time; Clean deletes everything the run wrote. The caller
// calls Clean once done, also after a failure.
//
// The package does not print and does not open stores: the command opens
// the bucket from its flags (package object/all), prints each check as it
// ends and the Results as a table. Options mirror the flags of `sluice
// objbench`, and errors about them name them as those flags.
package objbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/prefix"
	"github.com/sluicefs/sluice/internal/object/s3"
)

// Bench is a run of checks and measurements on one store, under a prefix
// of its own. Its methods are not safe for concurrent use.
type Bench struct {
	store  object.Store // the store named by the caller
	prefix string
	s      object.Store // store under prefix
}

// New returns a run on store under a fresh random prefix
// "objbench-XXXXXXXXXXXX/". It writes nothing yet.
func New(store object.Store) *Bench {
	var rnd [6]byte
	rand.Read(rnd[:])
	pfx := "objbench-" + hex.EncodeToString(rnd[:]) + "/"
	return &Bench{store: store, prefix: pfx, s: prefix.New(store, pfx)}
}

// Prefix returns the prefix of the store the run writes under.
func (b *Bench) Prefix() string { return b.prefix }

// CheckResult is the outcome of one functional check.
type CheckResult struct {
	// Name and Doc are those of the conformance.Check.
	Name, Doc string
	// Err is every problem the check found; nil when it passed.
	Err error
	// Elapsed is how long the check took.
	Elapsed time.Duration
}

// CheckConfig returns the configuration of the functional checks for a
// store of the given storage type (a name of object/all): sizes must be
// exact, since the checks see the backend itself, and S3 objects span its
// multipart parts.
func CheckConfig(storage string) conformance.Config {
	cfg := conformance.Config{ExactSizes: true}
	if storage == "s3" {
		cfg.PartSize = s3.DefaultPartSize
	}
	return cfg
}

// Check runs the conformance checks configured by cfg, one after the
// other, each in a fresh prefix of the run's. It calls checked, when not
// nil, as each ends, and returns an error when any failed.
func (b *Bench) Check(ctx context.Context, cfg conformance.Config, checked func(CheckResult)) error {
	failed := 0
	for _, c := range conformance.Checks(cfg) {
		start := time.Now()
		err := c.Run(ctx, prefix.New(b.s, "check-"+c.Name+"/"))
		if err != nil {
			failed++
		}
		if checked != nil {
			checked(CheckResult{Name: c.Name, Doc: c.Doc, Err: err, Elapsed: time.Since(start)})
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d functional checks failed on %s", failed, b.store)
	}
	return nil
}

// Clean deletes every object the run wrote and returns how many it
// deleted. It goes on when ctx is cancelled, since it cleans up after an
// interrupted run, but gives up after 10 minutes.
func (b *Bench) Clean(ctx context.Context) (int, error) {
	n, err := RemoveAll(context.WithoutCancel(ctx), b.s)
	if err != nil {
		return n, fmt.Errorf("clean up %s: %w", b.prefix, err)
	}
	return n, nil
}

// RemoveAll deletes every object of s, 16 at a time, and returns how
// many it deleted. It gives up after 10 minutes.
func RemoveAll(ctx context.Context, s object.Store) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n := 0
	for {
		infos, err := s.List(ctx, "", "", 1000)
		if err != nil {
			return n, err
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(16)
		for _, info := range infos {
			g.Go(func() error { return s.Delete(gctx, info.Key) })
		}
		if err := g.Wait(); err != nil {
			return n, err
		}
		n += len(infos)
		if len(infos) < 1000 {
			return n, nil
		}
	}
}
