package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/objbench"
)

// objbenchOptions are the settings of `sluice objbench`: the bucket, the
// checks and the measurement.
type objbenchOptions struct {
	objbench.Options
	storage        string
	keys           credentials
	skipFunctional bool
}

func newObjbench() *cobra.Command {
	o := objbenchOptions{Options: objbench.Defaults(), storage: "file"}
	cmd := &cobra.Command{
		Use:   "objbench [flags] BUCKET",
		Short: "Check and measure an object store",
		Long: `Check that an object store behaves as Sluice needs, with the conformance
checks every backend passes in Sluice's own tests (put, get, ranged get,
head, missing keys, overwrite, delete, listing in key order and in pages,
concurrent and atomic overwrites, objects of several multipart parts, puts
whose content fails), printing pass or fail for each check, then measure it: blocks of --block-size
making up --big-object-size, one object of --big-object-size in one put
(multipart where the store has it), and --small-objects objects of
--small-object-size, with --threads requests at a time. It prints a table of
count, throughput and median latency per operation.

Everything is written under a random objbench-*/ prefix of BUCKET and deleted
at the end, also when a check fails. The command exits non-zero when a
functional check fails.`,
		Example: `  sluice objbench /tmp/bucket --big-object-size 64M
  sluice objbench --storage s3 --access-key AK --secret-key SK http://127.0.0.1:9000/mybucket -p 4`,
		Args: exactArgs(1, "BUCKET"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runObjbench(cmd.Context(), cmd.OutOrStdout(), args[0], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.storage, "storage", o.storage, "object storage type: "+strings.Join(objall.Storages(), ", "))
	o.keys.addFlags(fl)
	fl.IntVarP(&o.Threads, "threads", "p", o.Threads, "requests at a time")
	fl.Var(sizeValue{&o.BlockSize, 1 << 10}, "block-size", "size of the blocks a big object is cut into; a plain number is KiB")
	fl.Var(sizeValue{&o.BigObjectSize, 1 << 20}, "big-object-size", "size of the big object; a plain number is MiB")
	fl.Var(sizeValue{&o.SmallObjectSize, 1 << 10}, "small-object-size", "size of each small object; a plain number is KiB")
	fl.IntVar(&o.SmallObjects, "small-objects", o.SmallObjects, "number of small objects")
	fl.BoolVar(&o.skipFunctional, "skip-functional-tests", false, "skip the functional checks")
	return cmd
}

func runObjbench(ctx context.Context, out io.Writer, bucket string, o *objbenchOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := o.Validate(); err != nil {
		return err
	}
	keys := o.keys.withEnv()
	if o.storage == "s3" {
		bucket, keys = moveURLCredentials(bucket, keys)
	}
	store, err := objall.Open(o.storage, bucket, objall.Options{
		AccessKey: keys.accessKey, SecretKey: keys.secretKey, SessionToken: keys.sessionToken})
	if err != nil {
		return err
	}
	if c, ok := store.(object.Creator); ok {
		if err := c.Create(ctx); err != nil {
			return fmt.Errorf("create bucket: %w", err)
		}
	}
	return checkAndMeasure(ctx, out, store, o)
}

// checkAndMeasure checks and measures store under a random prefix, which
// it empties before returning, and prints each check as it ends and the
// figures.
func checkAndMeasure(ctx context.Context, out io.Writer, store object.Store, o *objbenchOptions) (err error) {
	b := objbench.New(store)
	fmt.Fprintf(out, "Object store %s, writing under %s\n", store, b.Prefix())
	defer func() {
		n, cerr := b.Clean(ctx)
		fmt.Fprintf(out, "Removed %d objects under %s\n", n, b.Prefix())
		if err == nil {
			err = cerr
		}
	}()

	if !o.skipFunctional {
		fmt.Fprintln(out, "\nFunctional checks:")
		if err := b.Check(ctx, objbench.CheckConfig(o.storage), func(c objbench.CheckResult) {
			status := "pass"
			if c.Err != nil {
				status = "FAIL: " + strings.ReplaceAll(c.Err.Error(), "\n", "; ")
			}
			fmt.Fprintf(out, "  %-44s %-4s (%s)\n", c.Doc, status, c.Elapsed.Round(time.Millisecond))
		}); err != nil {
			return err
		}
	}
	results, err := b.Measure(ctx, o.Options)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nBenchmark (%d threads, block size %s, big object %s, %d small objects of %s):\n",
		o.Threads, formatSize(o.BlockSize), formatSize(o.BigObjectSize), o.SmallObjects, formatSize(o.SmallObjectSize))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tSIZE\tCOUNT\tTHROUGHPUT\tMEDIAN ms/op\tP99 ms/op\t")
	for _, r := range results {
		size := "-"
		if r.Size >= 0 {
			size = formatSize(r.Size)
		}
		throughput := fmt.Sprintf("%.0f objects/s", r.Rate())
		if r.Bytes > 0 {
			throughput = fmt.Sprintf("%.1f MiB/s", r.Rate())
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.2f\t%.2f\t\n", r.Op, size, r.Count, throughput,
			float64(r.Median.Microseconds())/1000, float64(r.P99.Microseconds())/1000)
	}
	return tw.Flush()
}
