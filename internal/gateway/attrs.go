package gateway

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/vfs/pathfs"
)

// The extended attributes the gateway keeps of files and buckets.
const (
	xattrPrefix = "user.s3."
	// xattrETag is the ETag with the size and mtime of the file it was
	// computed for: "ETAG SIZE MTIME-NS".
	xattrETag = xattrPrefix + "etag"
	// xattrACL is a bucket's ACL, as versitygw gives it.
	xattrACL = xattrPrefix + "acl"
	// xattrMeta begins the names of the user metadata (x-amz-meta-NAME).
	xattrMeta = xattrPrefix + "meta."
)

// objectMeta is what an object has besides its bytes.
type objectMeta struct {
	// headers are the standard headers, by lower-case name: content-type,
	// content-encoding, content-disposition, content-language,
	// cache-control, expires; kept as the attributes user.s3.NAME.
	headers map[string]string
	user    map[string]string // x-amz-meta-NAME, by NAME
}

// noXattrs reports whether err says the volume keeps no extended
// attributes (formatted without them).
func noXattrs(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.ENOSYS)
}

// stampFor returns the stamp of the ETag of a file of these attributes.
func stampFor(fi fs.FileInfo) string {
	return strconv.FormatInt(fi.Size(), 10) + " " + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

// attrReader reads the extended attributes of one file: an open
// pathfs.File, or pathAttrs.
type attrReader interface {
	GetXattr(name string) ([]byte, error)
	Xattrs() ([]string, error)
}

// pathAttrs reads the extended attributes of the file p.
type pathAttrs struct {
	ctx context.Context
	fs  *pathfs.FS
	p   string
}

func (a pathAttrs) GetXattr(name string) ([]byte, error) { return a.fs.GetXattr(a.ctx, a.p, name) }
func (a pathAttrs) Xattrs() ([]string, error)            { return a.fs.Xattrs(a.ctx, a.p) }

// etagOf returns the ETag of the file of attributes fi whose extended
// attributes r reads: the one the gateway kept when it wrote it, if the
// file has not changed since; otherwise one made of its inode, size and
// mtime, which changes when a mount changes the file.
func etagOf(r attrReader, fi fs.FileInfo) string {
	if v, err := r.GetXattr(xattrETag); err == nil {
		if etag, stamp, ok := strings.Cut(string(v), " "); ok && (stamp == stampFor(fi) || fi.IsDir()) {
			return etag
		}
	}
	var ino meta.Ino
	if a, ok := fi.Sys().(*meta.Attr); ok {
		ino = a.Ino
	}
	sum := md5.Sum(fmt.Appendf(nil, "%d %s", ino, stampFor(fi)))
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// setETag keeps etag as the ETag of the file p of attributes fi.
func (b *Backend) setETag(ctx context.Context, p, etag string, fi fs.FileInfo) error {
	err := b.fs.SetXattr(ctx, p, xattrETag, []byte(etag+" "+stampFor(fi)))
	if noXattrs(err) {
		return nil
	}
	return err
}

// setMeta keeps m as attributes of the file p.
func (b *Backend) setMeta(ctx context.Context, p string, m objectMeta) error {
	for _, k := range sortedKeys(m.headers) {
		if err := b.setXattr(ctx, p, xattrPrefix+k, m.headers[k]); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(m.user) {
		if err := b.setXattr(ctx, p, xattrMeta+strings.ToLower(k), m.user[k]); err != nil {
			return err
		}
	}
	return nil
}

func (b *Backend) setXattr(ctx context.Context, p, name, value string) error {
	if value == "" {
		return nil
	}
	err := b.fs.SetXattr(ctx, p, name, []byte(value))
	if noXattrs(err) {
		return nil
	}
	return err
}

// getMeta returns what setMeta kept of the file whose attributes r
// reads.
func getMeta(r attrReader) (objectMeta, error) {
	m := objectMeta{headers: map[string]string{}, user: map[string]string{}}
	names, err := r.Xattrs()
	if noXattrs(err) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, xattrPrefix)
		if !ok || n == xattrETag || n == xattrACL {
			continue
		}
		v, err := r.GetXattr(n)
		if errors.Is(err, syscall.ENODATA) {
			continue
		}
		if err != nil {
			return m, err
		}
		if name, ok := strings.CutPrefix(n, xattrMeta); ok {
			m.user[name] = string(v)
		} else {
			m.headers[rest] = string(v)
		}
	}
	return m, nil
}

// header returns the header name of m, nil when it has none.
func (m objectMeta) header(name string) *string {
	if v, ok := m.headers[name]; ok {
		return &v
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
