package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/engine/all"
	"github.com/sluicefs/sluice/internal/object"
	objall "github.com/sluicefs/sluice/internal/object/all"
	"github.com/sluicefs/sluice/internal/object/encrypt"
	"github.com/sluicefs/sluice/internal/object/prefix"
)

type formatOptions struct {
	storage    string
	bucket     string
	keys       credentials
	blockSize  int64
	compress   string
	trashDays  int
	trashSet   bool // --trash-days was given: a re-format changes it
	capacity   int64
	inodes     uint64
	hashPrefix bool
	enableACL  bool
	rsaKey     string // path of the PEM file of --encrypt-rsa-key
	rsaAlgo    string
}

func defaultBucket() string {
	if os.Geteuid() == 0 {
		return "/var/sluice/local"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".sluice/local"
	}
	return filepath.Join(home, ".sluice", "local")
}

func newFormat() *cobra.Command {
	o := formatOptions{storage: "file", blockSize: 4 << 20, compress: "none"}
	cmd := &cobra.Command{
		Use:   "format META-URL NAME",
		Short: "Create a volume, or change the mutable settings of one",
		Long: `Create a volume named NAME whose metadata lives in META-URL and whose data
lives in a bucket of object storage. Running format again on an existing
volume may change its capacity and inode limits, and refuses to change the
settings its data depends on (storage, bucket, block size, compression).

META-URL examples:
  sqlite3:///var/lib/sluice/vol.db                     SQLite file (created if missing)
  redis://[USER:PASS@]HOST:6379/1                      Redis (several HOST:PORT: a cluster)
  postgres://USER:PASS@HOST:5432/DB?sslmode=disable    PostgreSQL
  mysql://USER:PASS@(HOST:3306)/DB                     MySQL or MariaDB
  etcd://HOST:2379[,HOST:2379...]/PREFIX               etcd
  tikv://PD:2379[,PD:2379...]/PREFIX                   TiKV
  sluice://HOST:9400/NAME                              in-memory metadata server (sluice meta-server)

NAME is 3-63 lower-case letters, digits and '-'; all objects of the volume
are stored under NAME/ in the bucket.`,
		Example: `  sluice format sqlite3://vol.db myvol --bucket /data/sluice
  sluice format sqlite3://vol.db myvol --block-size 1M --compress lz4
  sluice format redis://127.0.0.1/1 myvol --storage s3 --bucket http://127.0.0.1:9000/mybucket \
      --access-key AK --secret-key SK         (or ACCESS_KEY=AK SECRET_KEY=SK sluice format ...)`,
		Args: exactArgs(2, "META-URL and NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.trashSet = cmd.Flags().Changed("trash-days")
			return runFormat(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], &o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.storage, "storage", o.storage, "object storage type: "+strings.Join(objall.Storages(), ", "))
	fl.StringVar(&o.bucket, "bucket", "", "bucket of the storage: for file, a directory (default "+defaultBucket()+
		"); for s3, a URL: http://HOST:PORT/BUCKET or https://BUCKET.HOST[?region=R]")
	o.keys.addFlags(fl)
	fl.Var(sizeValue{&o.blockSize, 1 << 10}, "block-size", "size of data blocks: a power of two from 64K to 16M; a plain number is KiB")
	fl.StringVar(&o.compress, "compress", o.compress, "compression of data blocks: none, lz4 or zstd")
	fl.IntVar(&o.trashDays, "trash-days", 1, "days deleted files stay in /.trash before their data is deleted (0: delete at once; default 1, as JuiceFS; a re-format keeps the old value unless given)")
	fl.Var(sizeValue{&o.capacity, 1 << 30}, "capacity", "hard limit of the volume's space; a plain number is GiB (0: unlimited)")
	fl.Uint64Var(&o.inodes, "inodes", 0, "hard limit of the number of files (0: unlimited)")
	fl.BoolVar(&o.hashPrefix, "hash-prefix", false, "spread block keys over 256 prefixes (helps some object stores scale)")
	fl.BoolVar(&o.enableACL, "enable-acl", false, "enable POSIX ACLs (system.posix_acl_access and _default), enforced on every mount")
	fl.StringVar(&o.rsaKey, "encrypt-rsa-key", "", "encrypt every block with a fresh key wrapped by this RSA private key (a PEM file; a passphrase-protected key reads its passphrase from "+encrypt.PassphraseEnv+")")
	fl.StringVar(&o.rsaAlgo, "encrypt-algo", encrypt.AES256GCMRSA, "cipher of encrypted blocks: "+encrypt.AES256GCMRSA+" or "+encrypt.ChaCha20RSA)
	return cmd
}

// exactArgs is cobra.ExactArgs with a message that names the arguments.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("%s expects %s (got %d arguments); see `%s --help`", cmd.Name(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// rangeArgs accepts from min to max arguments, with a message that names
// them.
func rangeArgs(min, max int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return fmt.Errorf("%s expects %s (got %d arguments); see `%s --help`", cmd.Name(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

func runFormat(ctx context.Context, out io.Writer, metaURL, name string, o *formatOptions) error {
	if o.trashDays < 0 {
		return fmt.Errorf("--trash-days %d: use 0 (delete at once) or more days", o.trashDays)
	}
	if o.bucket == "" {
		if o.storage != "file" && o.storage != "mem" && slices.Contains(objall.Storages(), o.storage) {
			return fmt.Errorf("--bucket is required for %s storage", o.storage)
		}
		o.bucket = defaultBucket()
	}
	var keys credentials
	var err error
	if o.bucket, keys, err = volumeBucket(o.storage, o.bucket, o.keys.withEnv()); err != nil {
		return err
	}
	if err := meta.ValidateBlockSize(o.blockSize); err != nil {
		return err
	}
	f := &meta.Format{
		Name: name, UUID: uuid.NewString(), Storage: o.storage, Bucket: o.bucket,
		AccessKey: keys.accessKey, SecretKey: keys.secretKey, SessionToken: keys.sessionToken,
		BlockSize: int(o.blockSize >> 10), Compression: o.compress, HashPrefix: o.hashPrefix,
		Capacity: uint64(o.capacity), Inodes: o.inodes, TrashDays: o.trashDays, MetaVersion: meta.MetaVersion,
		EnableACL: o.enableACL,
	}
	if f.Compression == "none" {
		f.Compression = ""
	}
	if err := setEncryption(f, o); err != nil {
		return err
	}
	if err := f.Validate(); err != nil {
		return err
	}

	// Check the metadata engine first: whether the volume exists decides
	// whether the bucket may hold data already.
	existed := sqliteFileExists(metaURL)
	st, err := all.Open(ctx, metaURL, true)
	if err != nil {
		return err
	}
	defer st.Close()
	old, err := meta.Load(ctx, st)
	if err != nil {
		old = nil
	} else {
		f.UUID = old.UUID
		if !o.trashSet {
			f.TrashDays = old.TrashDays
		}
		if o.rsaKey == "" {
			// Re-formatting without a key keeps the volume's.
			f.EncryptKey, f.EncryptAlgo, f.KeyEncrypted = old.EncryptKey, old.EncryptAlgo, old.KeyEncrypted
		}
		if f.AccessKey == "" && f.SecretKey == "" && f.SessionToken == "" {
			// Re-formatting without keys keeps the stored ones.
			f.AccessKey, f.SecretKey, f.SessionToken = old.AccessKey, old.SecretKey, old.SessionToken
		}
		// Refuse what the stored data depends on before touching the
		// bucket, as `sluice config` does (FormatVolume checks again).
		if err := f.CheckImmutable(old); err != nil {
			return err
		}
	}

	// The keys given to format (flags, else environment) are the ones to
	// check and store: openBucket's environment override is for later runs.
	bucket, err := objall.Open(f.Storage, f.Bucket, objall.Options{
		AccessKey: f.AccessKey, SecretKey: f.SecretKey, SessionToken: f.SessionToken})
	if err != nil {
		return cleanupNew(st, metaURL, existed, fmt.Errorf("object storage: %w", err))
	}
	if c, ok := bucket.(object.Creator); ok {
		if err := c.Create(ctx); err != nil {
			return cleanupNew(st, metaURL, existed, fmt.Errorf("create bucket: %w", err))
		}
	}
	vol := prefix.New(bucket, f.Name+"/")
	if err := selfTest(ctx, vol); err != nil {
		return cleanupNew(st, metaURL, existed, fmt.Errorf("bucket %s is not usable: %w", bucket, err))
	}
	if old == nil {
		objs, err := vol.List(ctx, "", "", 1)
		if err != nil {
			return cleanupNew(st, metaURL, existed, fmt.Errorf("list bucket %s: %w", bucket, err))
		}
		if len(objs) > 0 {
			return cleanupNew(st, metaURL, existed, fmt.Errorf("bucket %s already holds objects under %s/ (e.g. %s): refusing to format over them; choose another bucket or name", bucket, f.Name, objs[0].Key))
		}
		if err := vol.Put(ctx, "juicefs_uuid", strings.NewReader(f.UUID)); err != nil {
			return cleanupNew(st, metaURL, existed, fmt.Errorf("write volume marker: %w", err))
		}
	}
	created, err := meta.FormatVolume(ctx, st, f)
	if err != nil {
		if old == nil {
			vol.Delete(ctx, "juicefs_uuid")
		}
		return cleanupNew(st, metaURL, existed, err)
	}
	verb := "updated"
	if created {
		verb = "created"
	}
	b, _ := json.MarshalIndent(f.Redacted(), "", "  ")
	fmt.Fprintf(out, "Volume %q %s in %s\n%s\n", f.Name, verb, st.Name(), b)
	return nil
}

// volumeBucket completes the bucket given to format or config: a file
// bucket becomes an absolute path, and the user and password of an s3
// URL move to keys (unless keys has some), so that the stored bucket holds
// no secret.
func volumeBucket(storage, bucket string, keys credentials) (string, credentials, error) {
	switch storage {
	case "s3":
		bucket, keys = moveURLCredentials(bucket, keys)
	case "file":
		abs, err := filepath.Abs(bucket)
		if err != nil {
			return "", keys, fmt.Errorf("bucket %q: %w", bucket, err)
		}
		bucket = abs
	}
	return bucket, keys, nil
}

// setEncryption reads the RSA key of --encrypt-rsa-key into f, checking
// that it parses (with the passphrase from the environment) and that the
// algorithm is known.
func setEncryption(f *meta.Format, o *formatOptions) error {
	if o.rsaKey == "" {
		return nil
	}
	if o.rsaAlgo != encrypt.AES256GCMRSA && o.rsaAlgo != encrypt.ChaCha20RSA {
		return fmt.Errorf("--encrypt-algo %q: use %s or %s", o.rsaAlgo, encrypt.AES256GCMRSA, encrypt.ChaCha20RSA)
	}
	pemBytes, err := os.ReadFile(o.rsaKey)
	if err != nil {
		return fmt.Errorf("--encrypt-rsa-key: %w", err)
	}
	pass := encrypt.Passphrase()
	if _, err := encrypt.ParsePrivateKey(pemBytes, []byte(pass)); err != nil {
		return fmt.Errorf("--encrypt-rsa-key %s: %w", o.rsaKey, err)
	}
	f.EncryptKey, f.EncryptAlgo, f.KeyEncrypted = string(pemBytes), o.rsaAlgo, pass != ""
	return nil
}

// selfTest writes, reads back and deletes a random object.
func selfTest(ctx context.Context, s object.Store) error {
	var rnd [8]byte
	rand.Read(rnd[:])
	key := "testing/" + hex.EncodeToString(rnd[:])
	want := []byte("sluice storage self-test " + key)
	if err := s.Put(ctx, key, bytes.NewReader(want)); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	defer s.Delete(ctx, key)
	r, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if !bytes.Equal(got, want) {
		return errors.New("get returned different bytes than were put")
	}
	if err := s.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	return nil
}

// sqliteFileExists reports whether metaURL names an existing SQLite file,
// so that a failed format can remove a file it created.
func sqliteFileExists(metaURL string) bool {
	path, ok := strings.CutPrefix(metaURL, "sqlite3://")
	if !ok {
		return true
	}
	path, _, _ = strings.Cut(path, "?")
	_, err := os.Stat(path)
	return err == nil
}

// cleanupNew removes a metadata file this format created before failing,
// so that a failed format leaves no half-created volume.
func cleanupNew(st interface{ Close() error }, metaURL string, existed bool, err error) error {
	if !existed {
		st.Close()
		path, _ := strings.CutPrefix(metaURL, "sqlite3://")
		path, _, _ = strings.Cut(path, "?")
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			os.Remove(p)
		}
	}
	return err
}
