package volume

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/vfs"
)

// Level says how much of a volume Open assembles. Each level includes the
// ones before it, and Close releases what was opened.
type Level int

const (
	// Metadata opens the metadata engine and reads the volume's settings
	// (what `sluice status` needs). It is the zero Level.
	Metadata Level = iota
	// Data adds the object storage stack of the volume's blocks (gc,
	// fsck).
	Data
	// Client adds a chunk store and a metadata client, which registers a
	// session and runs the client's background jobs (offline compaction,
	// gc --delete).
	Client
	// FileSystem adds a VFS over them, for an access path such as a FUSE
	// mount.
	FileSystem
)

// String returns the name of the level.
func (l Level) String() string {
	switch l {
	case Metadata:
		return "metadata"
	case Data:
		return "data"
	case Client:
		return "client"
	case FileSystem:
		return "file system"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// Options say what Open assembles and how. The zero value opens the
// metadata only; every zero field takes the default its comment names.
type Options struct {
	// Level is how much to open. Default Metadata.
	Level Level

	// AccessKey, SecretKey and SessionToken, when not empty, replace the
	// object storage credentials stored in the volume's settings, one by
	// one. Default: the stored ones.
	AccessKey, SecretKey, SessionToken string
	// Passphrase unlocks a volume encryption key that is protected by
	// one. Default: none, and Open fails on such a volume from Level Data
	// on.
	Passphrase string
	// OpenTimeout bounds opening the metadata engine and reading the
	// volume's settings, so that Open fails instead of hanging on an
	// engine that does not answer. Default 0: no bound.
	OpenTimeout time.Duration
	// TxTimeout bounds each transaction, its retries included, of the
	// store Volume.Store returns (meta.Bound), so that a command working
	// on the volume without a client fails instead of hanging on an engine
	// that stops answering. A client (Level Client and above) bounds its
	// own by Meta.OpTimeout. Default 0: no bound.
	TxTimeout time.Duration

	// Objects tunes the object storage stack (Level Data and above).
	Objects ObjectOptions

	// Chunks configures the chunk store (Level Client and above), with
	// chunk.Config's defaults for zero fields. Open sets the fields the
	// volume decides: BlockSize, HashPrefix, VolumeUUID and RangedReads
	// (only on volumes without compression and encryption, which serve
	// ranges cheaply); it sets CachePartialOnly on storage local to this
	// host (file, mem), where caching written blocks would store them
	// twice on the same disks; Logger defaults to Options.Logger.
	Chunks chunk.Config

	// Meta configures the metadata client (Level Client and above), with
	// meta.Config's defaults for zero fields. Open sets DeleteSlice to the
	// chunk store's; SessionInfo.Host defaults to this host's name and
	// Logger to Options.Logger.
	Meta meta.Config

	// VFS configures the VFS (Level FileSystem). Open adds the "flush"
	// control (upload the blocks staged for writeback) and, unless
	// Meta.ReadOnly, a Compactor; Logger defaults to Options.Logger.
	VFS vfs.Config

	// CacheGroup makes the mount a member of a cache group (Level
	// Client and above).
	CacheGroup CacheGroupOptions

	// Subdir, when set, makes the VFS serve that directory of the volume
	// as its root (package subtree): nothing outside it can be reached
	// through the VFS. A path from the volume's root.
	Subdir string

	// Logger receives what the layers report in the background (retries,
	// staged uploads, sessions). Default: discarded.
	Logger *slog.Logger

	// WrapBucket, when set, wraps the volume's raw bucket before anything
	// else: tests inject object storage faults with it (fault.New).
	// Production code leaves it nil.
	WrapBucket func(object.Store) (object.Store, error)
}

// ObjectOptions tune the decorators Open stacks on the volume's bucket.
type ObjectOptions struct {
	// MaxDownloads bounds concurrent downloads. Default 0: no bound.
	MaxDownloads int
	// UploadLimit and DownloadLimit bound the bandwidth of each direction,
	// in bytes per second. Default 0: the volume's setting (`sluice
	// format --upload-limit`), else unlimited.
	UploadLimit, DownloadLimit int64
	// PutTimeout bounds each attempt of a Put, Head, List or Delete, and
	// GetTimeout each attempt of a Get with the reading of its stream;
	// an attempt that takes longer is retried. Default 0: no bound
	// (GetTimeout: PutTimeout).
	PutTimeout, GetTimeout time.Duration
}

// Validate checks the options Open does not pass on to a component that
// checks them itself; Open calls it.
func (o *Options) Validate() error {
	switch {
	case o.Level < Metadata || o.Level > FileSystem:
		return fmt.Errorf("volume: unknown level %d", int(o.Level))
	case o.Objects.MaxDownloads < 0:
		return fmt.Errorf("volume: MaxDownloads %d is negative", o.Objects.MaxDownloads)
	case o.Objects.UploadLimit < 0 || o.Objects.DownloadLimit < 0:
		return fmt.Errorf("volume: negative bandwidth limit")
	case o.OpenTimeout < 0:
		return fmt.Errorf("volume: negative OpenTimeout")
	case o.TxTimeout < 0:
		return fmt.Errorf("volume: negative TxTimeout")
	case o.Objects.PutTimeout < 0 || o.Objects.GetTimeout < 0:
		return fmt.Errorf("volume: negative object storage timeout")
	}
	return nil
}

// logger returns the logger of background events.
func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}
