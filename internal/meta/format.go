package meta

import (
	"encoding/json"
	"fmt"
)

// Format holds the settings of a volume, stored in the metadata engine by
// `sluice format`. The JSON names match the dump format shared with
// JuiceFS 1.x (see the dump-format spec).
type Format struct {
	Name             string
	UUID             string
	Storage          string
	Bucket           string
	AccessKey        string `json:",omitempty"`
	SecretKey        string `json:",omitempty"`
	SessionToken     string `json:",omitempty"`
	BlockSize        int    // KiB
	Compression      string `json:",omitempty"`
	Shards           int    `json:",omitempty"`
	HashPrefix       bool   `json:",omitempty"`
	Capacity         uint64 `json:",omitempty"` // bytes, 0 = unlimited
	Inodes           uint64 `json:",omitempty"` // 0 = unlimited
	EncryptKey       string `json:",omitempty"`
	EncryptAlgo      string `json:",omitempty"`
	KeyEncrypted     bool   `json:",omitempty"`
	UploadLimit      int64  `json:",omitempty"` // Mbps
	DownloadLimit    int64  `json:",omitempty"` // Mbps
	TrashDays        int
	MetaVersion      int
	MinClientVersion string `json:",omitempty"`
	MaxClientVersion string `json:",omitempty"`
	EnableACL        bool   `json:",omitempty"`
}

// MetaVersion is the layout version of the metadata this build formats
// new volumes with. A volume keeps the version it was formatted (or
// loaded) with, and clients refuse a newer one than they know:
//
//   - 1: the first layout.
//   - 2: nodes flag their extended attributes (FlagXattrs), which clients
//     of version 1 would not keep.
const MetaVersion = 2

// Block sizes allowed at format, in bytes.
const (
	MinBlockSize = 64 << 10
	MaxBlockSize = 16 << 20
)

// ValidateBlockSize checks that bytes is a power of two from 64 KiB to 16 MiB.
func ValidateBlockSize(bytes int64) error {
	if bytes < MinBlockSize || bytes > MaxBlockSize || bytes&(bytes-1) != 0 {
		return fmt.Errorf("invalid block size %d: must be a power of two from 64K to 16M", bytes)
	}
	return nil
}

// Validate checks settings before they are stored.
func (f *Format) Validate() error {
	if !validName(f.Name) {
		return fmt.Errorf("invalid volume name %q: use 3-63 lower-case letters, digits and '-', starting and ending with a letter or digit", f.Name)
	}
	if err := ValidateBlockSize(int64(f.BlockSize) << 10); err != nil {
		return err
	}
	switch f.Compression {
	case "", "none", "lz4", "zstd":
	default:
		return fmt.Errorf("invalid compression %q (use none, lz4 or zstd)", f.Compression)
	}
	if f.TrashDays < 0 {
		return fmt.Errorf("invalid trash days %d", f.TrashDays)
	}
	return nil
}

func validName(s string) bool {
	if len(s) < 3 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0 && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

// Redacted returns a copy with secrets replaced, for display.
func (f *Format) Redacted() *Format {
	c := *f
	for _, p := range []*string{&c.SecretKey, &c.SessionToken, &c.EncryptKey} {
		if *p != "" {
			*p = "removed"
		}
	}
	return &c
}

// CheckImmutable refuses changes, from old to f, of the settings the
// volume's stored data depends on: its name (the objects' prefix), UUID,
// block size, compression, hash prefix, shards and encryption; and turning
// POSIX ACLs off. Both `sluice format` on an existing volume and `sluice
// config` refuse what it refuses.
func (f *Format) CheckImmutable(old *Format) error {
	type field struct {
		name     string
		old, new any
	}
	for _, x := range []field{
		{"name", old.Name, f.Name},
		{"UUID", old.UUID, f.UUID},
		{"block size", fmt.Sprintf("%dK", old.BlockSize), fmt.Sprintf("%dK", f.BlockSize)},
		{"compression", compressionName(old.Compression), compressionName(f.Compression)},
		{"hash prefix", old.HashPrefix, f.HashPrefix},
		{"shards", old.Shards, f.Shards},
		{"encryption", encryptionName(old.EncryptAlgo), encryptionName(f.EncryptAlgo)},
	} {
		if x.old != x.new {
			return fmt.Errorf("volume %q has %s %v; refusing to change it to %v: the stored data depends on it", old.Name, x.name, x.old, x.new)
		}
	}
	if old.EncryptKey != f.EncryptKey {
		return fmt.Errorf("volume %q is encrypted with another key (or none); refusing to change it: the stored data depends on it", old.Name)
	}
	if old.EnableACL && !f.EnableACL {
		return fmt.Errorf("volume %q has POSIX ACLs enabled; they cannot be turned off (keep --enable-acl)", old.Name)
	}
	return nil
}

// checkImmutable refuses what CheckImmutable refuses and, for a
// re-format, a change of storage or bucket: only `sluice config` moves a
// volume to another bucket (UpdateFormat).
func (f *Format) checkImmutable(old *Format) error {
	for _, x := range []struct{ name, old, new string }{
		{"storage", old.Storage, f.Storage},
		{"bucket", old.Bucket, f.Bucket},
	} {
		if x.old != x.new {
			return fmt.Errorf("volume %q has %s %v; refusing to change it to %v (`sluice config --%s` changes it)", old.Name, x.name, x.old, x.new, x.name)
		}
	}
	return f.CheckImmutable(old)
}

func compressionName(c string) string {
	if c == "" {
		return "none"
	}
	return c
}

func encryptionName(algo string) string {
	if algo == "" {
		return "none"
	}
	return algo
}

// DecodeFormat decodes stored settings, refusing a metadata version newer
// than this build's.
func DecodeFormat(b []byte) (*Format, error) {
	var f Format
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("corrupt volume settings: %w", err)
	}
	if f.MetaVersion > MetaVersion {
		return nil, fmt.Errorf("volume %q has metadata version %d, newer than this client supports (%d): upgrade sluice", f.Name, f.MetaVersion, MetaVersion)
	}
	return &f, nil
}
