package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/prefix"
	"github.com/sluicefs/sluice/internal/volume"
)

// configOptions are the flags of `sluice config`. Only the flags given
// change a setting.
type configOptions struct {
	capacity      int64 // bytes
	inodes        uint64
	trashDays     int
	storage       string
	bucket        string
	keys          credentials
	uploadLimit   int64 // Mbps
	downloadLimit int64 // Mbps

	// Settings fixed at format: config takes them only to refuse a
	// change with the reason (meta.Format.CheckImmutable).
	name       string
	uuid       string
	blockSize  int64
	compress   string
	hashPrefix bool
	shards     int
	rsaKey     string
	rsaAlgo    string

	yes         bool
	metaTimeout time.Duration
}

// configFlags are the flags that change a setting; without any, config
// prints the settings.
var configFlags = []string{"capacity", "inodes", "trash-days", "storage", "bucket", "access-key", "secret-key",
	"session-token", "upload-limit", "download-limit",
	"name", "uuid", "block-size", "compress", "hash-prefix", "shards", "encrypt-rsa-key", "encrypt-algo"}

func newConfig() *cobra.Command {
	o := configOptions{metaTimeout: meta.DefaultOpTimeout, rsaAlgo: encrypt.AES256GCMRSA}
	cmd := &cobra.Command{
		Use:   "config META-URL",
		Short: "Show or change the settings of a volume",
		Long: `Without flags, print the settings of the volume in META-URL (secrets shown as
"removed"). With flags, change those settings and print each change as
old → new.

Mounted clients reload the settings on every session heartbeat (--heartbeat
of mount, 12s by default) and apply at once the capacity, the inode limit,
the trash days and the bandwidth limits (unless the mount set its own
--upload-limit or --download-limit). A new storage, bucket or credentials
apply only to mounts made after the change: unmount and mount the running
ones again. Move the volume's objects (everything under NAME/ in the old
bucket) to the new bucket first; config checks that the new bucket works
(it writes, reads and deletes a test object under NAME/, with the keys a
mount will use: the new ones, or ACCESS_KEY, SECRET_KEY and SESSION_TOKEN
when set) and that it holds no other volume's objects under NAME/.

Settings the stored data depends on cannot change: name, UUID, block size,
compression, hash prefix, shards and encryption (--name, --uuid,
--block-size, --compress, --hash-prefix, --shards and --encrypt-rsa-key are
accepted only to be refused with the reason).

A risky change asks for confirmation on a terminal: a new storage or
bucket, a capacity or inode limit below what the volume uses now (writes
and creates then fail with ENOSPC), and trash days 0 (files deleted from
then on are gone at once, and the trash is emptied at its next expiry).
Without a terminal (in a script) such a change is refused unless --yes is
given.`,
		Example: `  sluice config sqlite3://vol.db                          # show the settings
  sluice config sqlite3://vol.db --capacity 100 --inodes 1000000
  sluice config sqlite3://vol.db --trash-days 7 --upload-limit 100
  sluice config redis://127.0.0.1/1 --bucket http://10.0.0.2:9000/mybucket --access-key AK --secret-key SK`,
		Args: exactArgs(1, "META-URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConfig(cmd.Context(), cmd.OutOrStdout(), newPrompt(cmd, o.yes), args[0], &o, cmd.Flags().Changed)
		},
	}
	fl := cmd.Flags()
	fl.Var(sizeValue{&o.capacity, 1 << 30}, "capacity", "hard limit of the volume's space; a plain number is GiB (0: unlimited)")
	fl.Uint64Var(&o.inodes, "inodes", 0, "hard limit of the number of files (0: unlimited)")
	fl.IntVar(&o.trashDays, "trash-days", 0, "days deleted files stay in /.trash before their data is deleted (0: delete at once)")
	fl.StringVar(&o.storage, "storage", "", "object storage type of the new bucket: "+strings.Join(objall.Storages(), ", ")+" (default: the volume's; mounts use it once mounted again)")
	fl.StringVar(&o.bucket, "bucket", "", "new bucket holding the volume's objects (mounts use it once mounted again)")
	o.keys.addFlags(fl)
	for flag, what := range map[string]string{"access-key": "access key", "secret-key": "secret key", "session-token": "session token"} {
		// Not read from the environment: config stores what it is given.
		fl.Lookup(flag).Usage = "new " + what + " of the object storage (mounts use it once mounted again)"
	}
	fl.Int64Var(&o.uploadLimit, "upload-limit", 0, "bandwidth limit of uploads of every mount, in Mbps (0: unlimited)")
	fl.Int64Var(&o.downloadLimit, "download-limit", 0, "bandwidth limit of downloads of every mount, in Mbps (0: unlimited)")
	fl.StringVar(&o.name, "name", "", "refused: the name is fixed at format")
	fl.StringVar(&o.uuid, "uuid", "", "refused: the UUID is fixed at format")
	fl.Var(sizeValue{&o.blockSize, 1 << 10}, "block-size", "refused: the block size is fixed at format")
	fl.StringVar(&o.compress, "compress", "", "refused: the compression is fixed at format")
	fl.BoolVar(&o.hashPrefix, "hash-prefix", false, "refused: the hash prefix is fixed at format")
	fl.IntVar(&o.shards, "shards", 0, "refused: the shards are fixed at format")
	fl.StringVar(&o.rsaKey, "encrypt-rsa-key", "", "refused: the encryption is fixed at format")
	fl.StringVar(&o.rsaAlgo, "encrypt-algo", o.rsaAlgo, "refused: the encryption is fixed at format")
	fl.BoolVarP(&o.yes, "yes", "y", false, "make risky changes without asking")
	fl.Var(secondsValue{&o.metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

// runConfig prints the settings of the volume at metaURL, or changes those
// whose flags set reports given.
func runConfig(ctx context.Context, out io.Writer, p prompt, metaURL string, o *configOptions, set func(string) bool) error {
	v, err := openVolume(ctx, metaURL, volume.Metadata, o.metaTimeout)
	if err != nil {
		return err
	}
	defer v.Close(context.WithoutCancel(ctx))
	old := v.Format()
	if !anySet(set, configFlags) {
		b, err := json.MarshalIndent(old.Redacted(), "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(b))
		return nil
	}
	f, err := o.apply(old, set)
	if err != nil {
		return err
	}
	changes := formatChanges(old, f)
	if len(changes) == 0 {
		fmt.Fprintf(out, "Volume %q already has these settings; nothing changed.\n", old.Name)
		return nil
	}
	moved := f.Storage != old.Storage || f.Bucket != old.Bucket
	remount := moved || f.AccessKey != old.AccessKey || f.SecretKey != old.SecretKey || f.SessionToken != old.SessionToken
	var risks []string
	if remount {
		has, err := checkBucket(ctx, f)
		if err != nil {
			return err
		}
		if moved {
			r := fmt.Sprintf("move the volume to %s bucket %s", f.Storage, f.Bucket)
			if !has {
				r += fmt.Sprintf(", which holds none of its objects yet (copy everything under %s/ there first)", f.Name)
			}
			risks = append(risks, r)
		}
	}
	space, inodes, err := usage(ctx, v.Store())
	if err != nil {
		return fmt.Errorf("read the volume's usage: %w", err)
	}
	risks = append(risks, limitRisks(old, f, space, inodes)...)
	if len(risks) > 0 {
		if p.terminal && !p.yes {
			for _, c := range changes {
				fmt.Fprintf(p.out, "  %s\n", c)
			}
		}
		if err := p.confirm("risky change of volume "+f.Name+": "+strings.Join(risks, "; "), "Change these settings?"); err != nil {
			return err
		}
	}
	if err := meta.UpdateFormat(ctx, v.Store(), old, f); err != nil {
		return err
	}
	fmt.Fprintf(out, "Volume %q updated in %s:\n", f.Name, v.Store().Name())
	for _, c := range changes {
		fmt.Fprintf(out, "  %s\n", c)
	}
	fmt.Fprintln(out, "Mounts apply capacity, inodes, trash days and bandwidth limits at their next heartbeat.")
	if remount {
		fmt.Fprintln(out, "Mounts keep using the old storage, bucket and credentials until they are mounted again: unmount and mount them to switch.")
	}
	return nil
}

// anySet reports whether set reports one of flags given.
func anySet(set func(string) bool, flags []string) bool {
	for _, name := range flags {
		if set(name) {
			return true
		}
	}
	return false
}

// apply returns a copy of old with the settings of the flags set reports
// given, checked: valid, and no change of what the stored data depends
// on.
func (o *configOptions) apply(old *meta.Format, set func(string) bool) (*meta.Format, error) {
	f := *old
	if set("capacity") {
		f.Capacity = uint64(o.capacity)
	}
	if set("inodes") {
		f.Inodes = o.inodes
	}
	if set("trash-days") {
		if o.trashDays < 0 {
			return nil, fmt.Errorf("--trash-days %d: use 0 (delete at once) or more days", o.trashDays)
		}
		f.TrashDays = o.trashDays
	}
	for _, l := range []struct {
		flag string
		mbps int64
		dst  *int64
	}{{"upload-limit", o.uploadLimit, &f.UploadLimit}, {"download-limit", o.downloadLimit, &f.DownloadLimit}} {
		if set(l.flag) {
			if l.mbps < 0 {
				return nil, fmt.Errorf("--%s %d: use 0 (unlimited) or more Mbps", l.flag, l.mbps)
			}
			*l.dst = l.mbps
		}
	}
	if err := o.applyLocation(&f, set); err != nil {
		return nil, err
	}
	if err := o.applyFixed(&f, set); err != nil {
		return nil, err
	}
	if err := f.CheckImmutable(old); err != nil {
		return nil, err
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return &f, nil
}

// applyLocation sets the storage, bucket and keys given. A new bucket is
// completed as format does (volumeBucket): keys in an s3 URL replace the
// stored ones, and key flags win over both.
func (o *configOptions) applyLocation(f *meta.Format, set func(string) bool) error {
	if set("storage") {
		if o.storage == "" {
			return errors.New("--storage: name a storage type: " + strings.Join(objall.Storages(), ", "))
		}
		f.Storage = o.storage
	}
	if set("bucket") {
		if o.bucket == "" {
			return errors.New("--bucket: name the new bucket")
		}
		f.Bucket = o.bucket
	}
	if set("storage") || set("bucket") {
		bucket, inURL, err := volumeBucket(f.Storage, f.Bucket, credentials{})
		if err != nil {
			return err
		}
		f.Bucket = bucket
		if inURL != (credentials{}) {
			f.AccessKey, f.SecretKey, f.SessionToken = inURL.accessKey, inURL.secretKey, ""
		}
	}
	for _, k := range []struct {
		flag string
		src  string
		dst  *string
	}{
		{"access-key", o.keys.accessKey, &f.AccessKey},
		{"secret-key", o.keys.secretKey, &f.SecretKey},
		{"session-token", o.keys.sessionToken, &f.SessionToken},
	} {
		if set(k.flag) {
			*k.dst = k.src
		}
	}
	return nil
}

// applyFixed sets the settings fixed at format that were given, for
// CheckImmutable to refuse any change.
func (o *configOptions) applyFixed(f *meta.Format, set func(string) bool) error {
	if set("name") {
		f.Name = o.name
	}
	if set("uuid") {
		f.UUID = o.uuid
	}
	if set("block-size") {
		f.BlockSize = int(o.blockSize >> 10)
	}
	if set("compress") {
		f.Compression = o.compress
		if f.Compression == "none" {
			f.Compression = ""
		}
	}
	if set("hash-prefix") {
		f.HashPrefix = o.hashPrefix
	}
	if set("shards") {
		f.Shards = o.shards
	}
	if set("encrypt-rsa-key") {
		if err := setEncryption(f, &formatOptions{rsaKey: o.rsaKey, rsaAlgo: o.rsaAlgo}); err != nil {
			return err
		}
	} else if set("encrypt-algo") && o.rsaAlgo != f.EncryptAlgo {
		f.EncryptAlgo = o.rsaAlgo
	}
	return nil
}

// limitRisks describes the risky changes among the limits: a capacity or
// inode limit lowered below the usage, and the trash turned off.
func limitRisks(old, f *meta.Format, space, inodes int64) []string {
	var risks []string
	if f.Capacity != old.Capacity && f.Capacity != 0 && int64(f.Capacity) < space {
		risks = append(risks, fmt.Sprintf("capacity %s is below the %s in use: writes will fail with ENOSPC", formatSize(int64(f.Capacity)), formatSize(space)))
	}
	if f.Inodes != old.Inodes && f.Inodes != 0 && int64(f.Inodes) < inodes {
		risks = append(risks, fmt.Sprintf("inode limit %d is below the %d files in use: creates will fail with ENOSPC", f.Inodes, inodes))
	}
	if f.TrashDays == 0 && old.TrashDays > 0 {
		risks = append(risks, "trash days 0: files deleted from now on are gone at once, and the trash is emptied at its next expiry")
	}
	return risks
}

// usage reads the space and inodes the volume in st uses, as of the last
// flush of each mount's counters (about a second behind).
func usage(ctx context.Context, st store.Store) (space, inodes int64, err error) {
	err = st.View(ctx, func(tx store.Tx) error {
		if space, err = tx.Counter(meta.CounterUsedSpace); err != nil {
			return err
		}
		inodes, err = tx.Counter(meta.CounterUsedInodes)
		return err
	})
	return space, inodes, err
}

// volumeObjects opens the bucket of f under the volume's prefix NAME/,
// with the keys a mount uses: f's, each replaced by its environment
// variable when that is set. It reaches the objects as stored (neither
// decrypted nor decompressed).
func volumeObjects(f *meta.Format) (object.Store, error) {
	keys := credentials{accessKey: f.AccessKey, secretKey: f.SecretKey, sessionToken: f.SessionToken}.envOverride()
	bucket, err := objall.Open(f.Storage, f.Bucket, objall.Options{
		AccessKey: keys.accessKey, SecretKey: keys.secretKey, SessionToken: keys.sessionToken})
	if err != nil {
		return nil, fmt.Errorf("object storage: %w", err)
	}
	return prefix.New(bucket, f.Name+"/"), nil
}

// checkBucket runs format's self test on the bucket of f (see
// volumeObjects), and refuses a bucket that holds another volume's
// objects under NAME/. It reports whether the bucket holds this volume's
// marker, written at format: whether its objects are there.
func checkBucket(ctx context.Context, f *meta.Format) (bool, error) {
	vol, err := volumeObjects(f)
	if err != nil {
		return false, err
	}
	if err := selfTest(ctx, vol); err != nil {
		return false, fmt.Errorf("bucket %s is not usable: %w", vol, err)
	}
	r, err := vol.Get(ctx, "juicefs_uuid", 0, -1)
	if errors.Is(err, object.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("bucket %s: read the volume marker: %w", vol, err)
	}
	b, err := io.ReadAll(io.LimitReader(r, 1<<10))
	r.Close()
	if err != nil {
		return false, fmt.Errorf("bucket %s: read the volume marker: %w", vol, err)
	}
	if got := strings.TrimSpace(string(b)); got != f.UUID {
		return false, fmt.Errorf("bucket %s holds the objects of another volume (UUID %s) under %s/; refusing to use it", vol, got, f.Name)
	}
	return true, nil
}

// change is one setting that config changes.
type change struct {
	field    string
	old, new string
}

func (c change) String() string { return fmt.Sprintf("%s: %s → %s", c.field, c.old, c.new) }

// formatChanges lists the settings that differ between old and f, in the
// order of meta.Format, with secrets redacted.
func formatChanges(old, f *meta.Format) []change {
	var out []change
	a, b := reflect.ValueOf(*old), reflect.ValueOf(*f)
	ra, rb := reflect.ValueOf(*old.Redacted()), reflect.ValueOf(*f.Redacted())
	for i := range a.NumField() {
		if a.Field(i).Equal(b.Field(i)) {
			continue
		}
		name := a.Type().Field(i).Name
		c := change{field: name, old: showSetting(name, ra.Field(i)), new: showSetting(name, rb.Field(i))}
		if c.old == c.new {
			c.new += " (a new one)" // a secret
		}
		out = append(out, c)
	}
	return out
}

// showSetting formats one setting for formatChanges.
func showSetting(field string, v reflect.Value) string {
	unlimited := v.CanInt() && v.Int() == 0 || v.CanUint() && v.Uint() == 0
	switch field {
	case "Capacity":
		if unlimited {
			return "unlimited"
		}
		return formatSize(int64(v.Uint()))
	case "Inodes":
		if unlimited {
			return "unlimited"
		}
	case "UploadLimit", "DownloadLimit":
		if unlimited {
			return "unlimited"
		}
		return fmt.Sprintf("%d Mbps", v.Int())
	case "TrashDays":
		if unlimited {
			return "0 (no trash)"
		}
	}
	if v.Kind() == reflect.String && v.String() == "" {
		return "(none)"
	}
	return fmt.Sprint(v.Interface())
}

// prompt asks the operator to confirm a risky operation. On a terminal it
// asks on out and reads the answer from in; in a script, where nobody can
// answer, it refuses unless --yes was given.
type prompt struct {
	in       io.Reader
	out      io.Writer
	terminal bool // in is a terminal
	yes      bool // --yes
}

// newPrompt returns the prompt of cmd: its standard input, asking on its
// standard error.
func newPrompt(cmd *cobra.Command, yes bool) prompt {
	in := cmd.InOrStdin()
	return prompt{in: in, out: cmd.ErrOrStderr(), terminal: isTerminal(in), yes: yes}
}

// isTerminal reports whether r is a terminal: a file that answers the
// terminal ioctl (/dev/null is a character device too, but no terminal).
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// confirm returns nil when the operator agrees to what (one line saying
// what is risky): at once with --yes, else when the answer to question
// is yes. Otherwise it returns an error naming what.
func (p prompt) confirm(what, question string) error {
	if p.yes {
		return nil
	}
	if !p.terminal {
		return fmt.Errorf("%s: refusing without confirmation, since standard input is not a terminal; pass --yes to confirm", what)
	}
	fmt.Fprintf(p.out, "%s\n%s [y/N] ", what, question)
	line, err := bufio.NewReader(p.in).ReadString('\n')
	if err != nil && line == "" {
		return fmt.Errorf("%s: no answer, nothing done", what)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("%s: not confirmed, nothing done", what)
}
