package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/backup"
	"github.com/sluicefs/sluice/internal/dump"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/encrypt"
)

// loadOptions are the flags of load.
type loadOptions struct {
	dump.LoadOptions
	rsaKey string // --encrypt-rsa-key
	algo   string // --encrypt-algo
}

func newLoad() *cobra.Command {
	o := loadOptions{LoadOptions: dump.LoadOptions{Threads: 4}}
	cmd := &cobra.Command{
		Use:   "load META-URL [FILE|-]",
		Short: "Create a volume in an empty metadata engine from a JSON dump",
		Long: `Read a metadata dump (written by 'sluice dump' or 'juicefs dump' of
JuiceFS 1.0 to 1.4) from FILE or standard input (no FILE, or -) into the
metadata engine at META-URL, which must hold no volume. A gzip or zstd
dump is recognised by its content. The volume then mounts on the bucket its
settings name, with the data already there: nothing is copied.

Link counts, used space and inodes, the next inode and slice numbers and
slice reference counts are recomputed from the tree, not taken from the
dump. What Sluice does not keep (quotas, sessions' open files, unknown
settings) is listed at the end. The input is checked as it is read: on a
malformed dump the load stops with the position of the problem and leaves
the engine empty, ready for another try; a load that was killed is cleared
by the next one.

Restoring an automatic backup ('sluice mount --backup-meta', or JuiceFS's):
backups are objects NAME/meta/dump-YYYY-MM-DD-HHMMSS.json.gz in the
volume's bucket. Copy one out with the storage's own tools (on file storage
it is a file already; on S3, e.g. 'aws s3 cp'), then load the copy. The
backup of an encrypted volume is encrypted with the volume's key: give the
PEM key the volume was formatted with as --encrypt-rsa-key (its passphrase
in SLUICE_RSA_PASSPHRASE or JFS_RSA_PASSPHRASE); --encrypt-algo is tried
for each algorithm when not given. A backup lacks the object storage
secret key: mount with ACCESS_KEY and SECRET_KEY set, or run
'sluice format' again with the keys to store them.`,
		Example: `  sluice load redis://127.0.0.1:6379/2 meta.json.gz
  juicefs dump sqlite3://jfs.db - | sluice load sqlite3://vol.db
  sluice load sqlite3://restored.db /data/bucket/vol/meta/dump-2024-03-13-120000.json.gz
  sluice load --encrypt-rsa-key key.pem sqlite3://restored.db dump-2024-03-13-120000.json.gz`,
		Args: rangeArgs(1, 2, "META-URL [FILE|-]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "-"
			if len(args) == 2 {
				file = args[1]
			}
			return runLoad(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), args[0], file, o)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&o.Threads, "threads", o.Threads, "batches of records written at once")
	fl.StringVar(&o.rsaKey, "encrypt-rsa-key", "", "PEM file of the RSA key of the volume, to decrypt a backup copied out of an encrypted volume's bucket")
	fl.StringVar(&o.algo, "encrypt-algo", "", "algorithm of that backup's encryption: "+strings.Join(encrypt.Algorithms, " or ")+" (default: try each)")
	return cmd
}

func runLoad(ctx context.Context, stdin io.Reader, out io.Writer, metaURL, file string, lo loadOptions) error {
	o := lo.LoadOptions
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Threads <= 0 {
		return errors.New("--threads must be positive")
	}
	in, total := stdin, int64(-1)
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("open dump: %w", err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			total = fi.Size()
		}
		in = f
	}
	if lo.rsaKey != "" {
		plain, err := unsealBackup(in, lo.rsaKey, lo.algo)
		if err != nil {
			return err
		}
		in, total = bytes.NewReader(plain), int64(len(plain))
	}
	// The bar follows the file's bytes (compressed or not).
	counted := &countReader{r: in}
	zr, err := dump.NewReader(counted)
	if err != nil {
		return err
	}
	defer zr.Close()
	st, err := all.Open(ctx, metaURL, true)
	if err != nil {
		return err
	}
	defer st.Close()
	store.DisableCache(st) // each record is written once, and read by no one
	bar := newByteBar("loaded", total)
	o.Progress = func(p dump.Progress) { bar.set(p.Entries, counted.n.Load()) }
	rep, err := dump.Load(ctx, st, zr, o)
	bar.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "loaded volume %q: %d entries (%d directories, %d files, %d symlinks, %d others; %d extra hard-link names), %d slice references\n",
		rep.Name, rep.Entries, rep.Dirs, rep.Files, rep.Symlinks, rep.Others, rep.HardLinks, rep.Slices)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "counter\tdumped\tloaded\t")
	for _, c := range []struct {
		name       string
		dumped, ld int64
	}{
		{"usedSpace", rep.Dumped.UsedSpace, rep.Loaded.UsedSpace},
		{"usedInodes", rep.Dumped.UsedInodes, rep.Loaded.UsedInodes},
		{"nextInode", rep.Dumped.NextInode, rep.Loaded.NextInode},
		{"nextChunk", rep.Dumped.NextChunk, rep.Loaded.NextChunk},
		{"nextSession", rep.Dumped.NextSession, rep.Loaded.NextSession},
	} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", c.name, c.dumped, c.ld)
	}
	tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintln(out, "note:", n)
	}
	for _, d := range rep.Dropped {
		fmt.Fprintln(out, "not loaded:", d)
	}
	return nil
}

// unsealBackup reads a backup copied out of an encrypted volume's bucket
// from in and decrypts it with the RSA key in the PEM file keyFile. Input
// that is a dump already (JSON, gzip or zstd) is returned as it is.
func unsealBackup(in io.Reader, keyFile, algo string) ([]byte, error) {
	pemKey, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("--encrypt-rsa-key: %w", err)
	}
	stored, err := object.ReadWhole(in, encrypt.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("read the encrypted backup: %w", err)
	}
	for _, magic := range [][]byte{{0x1f, 0x8b}, {0x28, 0xb5, 0x2f, 0xfd}, []byte("{")} {
		if bytes.HasPrefix(bytes.TrimLeft(stored, " \t\r\n"), magic) {
			return stored, nil
		}
	}
	plain, err := backup.Unseal(stored, pemKey, encrypt.Passphrase(), algo)
	if err != nil {
		return nil, fmt.Errorf("--encrypt-rsa-key %s: %w", keyFile, err)
	}
	return plain, nil
}

// countReader counts the bytes read through it; a decompressor may read
// on a goroutine of its own while the progress bar reads the count.
type countReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
