package gateway

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"
)

// A multipart upload is the directory sysDir/multipart/ID: its file
// "info" says what it uploads (uploadInfo, JSON), its parts are the files
// NNNNN.ETAG (the part's number, five digits, and the hex MD5 of its
// bytes), each written under a temporary name and renamed when whole.
// CompleteMultipartUpload assembles the parts into a file of the
// directory by copy_file_range, which shares their data rather than
// copying it, and renames that over the key.
const multipartDir = sysDir + "/multipart"

// uploadInfo is what a multipart upload uploads.
type uploadInfo struct {
	Bucket    string            `json:"bucket"`
	Key       string            `json:"key"`
	Initiated time.Time         `json:"initiated"`
	Headers   map[string]string `json:"headers,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

func uploadDir(id string) string { return multipartDir + "/" + id }

// partName returns the name of the file of part n of ETag etag.
func partName(n int32, etag string) string {
	return fmt.Sprintf("%05d.%s", n, strings.Trim(etag, `"`))
}

// parsePart returns the number and ETag of a part's file name.
func parsePart(name string) (int32, string, bool) {
	num, sum, ok := strings.Cut(name, ".")
	if !ok || len(num) != 5 || len(sum) != 32 {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 {
		return 0, "", false
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return 0, "", false
	}
	return int32(n), `"` + sum + `"`, true
}

// CreateMultipartUpload begins an upload.
func (b *Backend) CreateMultipartUpload(ctx context.Context, in s3response.CreateMultipartUploadInput) (s3response.InitiateMultipartUploadResult, error) {
	bucket, key := deref(in.Bucket), deref(in.Key)
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	if err := checkKey(key); err != nil {
		return s3response.InitiateMultipartUploadResult{}, err
	}
	info := uploadInfo{Bucket: bucket, Key: key, Initiated: time.Now().UTC(), Metadata: in.Metadata, Headers: map[string]string{}}
	for k, v := range map[string]*string{"content-type": in.ContentType, "content-encoding": in.ContentEncoding,
		"content-disposition": in.ContentDisposition, "content-language": in.ContentLanguage,
		"cache-control": in.CacheControl, "expires": in.Expires} {
		if v != nil && *v != "" {
			info.Headers[k] = *v
		}
	}
	data, err := json.Marshal(info)
	if err != nil {
		return s3response.InitiateMultipartUploadResult{}, fmt.Errorf("upload info: %w", err)
	}
	id := randomHex(16)
	if err := b.fs.MkdirAll(ctx, uploadDir(id), 0o700); err != nil {
		return s3response.InitiateMultipartUploadResult{}, failed(err, "create upload")
	}
	tmp, _, err := b.writeTemp(ctx, uploadDir(id), strings.NewReader(string(data)), nil)
	if err == nil {
		err = b.fs.Rename(ctx, tmp, uploadDir(id)+"/info")
	}
	if err != nil {
		b.fs.RemoveAll(context.WithoutCancel(ctx), uploadDir(id))
		return s3response.InitiateMultipartUploadResult{}, failed(err, "create upload")
	}
	return s3response.InitiateMultipartUploadResult{Bucket: bucket, Key: key, UploadId: id}, nil
}

// upload returns what the upload id uploads, or NoSuchUpload if it is not
// one of key in bucket.
func (b *Backend) upload(ctx context.Context, bucket, key, id string) (*uploadInfo, error) {
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return nil, err
	}
	if id == "" || strings.ContainsAny(id, "/.") {
		return nil, s3err.GetNoSuchUploadErr(id)
	}
	info, err := b.readInfo(ctx, id)
	if err != nil {
		return nil, err
	}
	if info.Bucket != bucket || info.Key != key {
		return nil, s3err.GetNoSuchUploadErr(id)
	}
	return info, nil
}

func (b *Backend) readInfo(ctx context.Context, id string) (*uploadInfo, error) {
	h, err := b.fs.OpenFile(ctx, uploadDir(id)+"/info", os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s3err.GetNoSuchUploadErr(id)
	}
	if err != nil {
		return nil, failed(err, "upload %s", id)
	}
	defer h.Close()
	data, err := io.ReadAll(h)
	if err != nil {
		return nil, failed(err, "upload %s", id)
	}
	var info uploadInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("upload %s: %w", id, err)
	}
	return &info, nil
}

// parts returns the parts of the upload id, by number.
func (b *Backend) parts(ctx context.Context, id string) (map[int32]s3response.Part, error) {
	list, err := b.fs.ReadDir(ctx, uploadDir(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, s3err.GetNoSuchUploadErr(id)
	}
	if err != nil {
		return nil, failed(err, "parts of %s", id)
	}
	out := map[int32]s3response.Part{}
	for _, fi := range list {
		n, etag, ok := parsePart(fi.Name())
		if !ok {
			continue
		}
		if old, ok := out[n]; ok && old.LastModified.After(fi.ModTime()) {
			continue // one replaced as this listing was made
		}
		out[n] = s3response.Part{PartNumber: int(n), ETag: etag, Size: fi.Size(), LastModified: fi.ModTime()}
	}
	return out, nil
}

// UploadPart writes a part of an upload, replacing one of its number.
func (b *Backend) UploadPart(ctx context.Context, in *s3.UploadPartInput) (*s3.UploadPartOutput, error) {
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if _, err := b.upload(ctx, bucket, key, id); err != nil {
		return nil, err
	}
	n := deref(in.PartNumber)
	if n < 1 || n > 10000 {
		return nil, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	body := in.Body
	if body == nil {
		body = strings.NewReader("")
	}
	tmp, etag, err := b.writeTemp(ctx, uploadDir(id), body, nil)
	if err != nil {
		return nil, failed(err, "upload part %d of %s", n, id)
	}
	old, _ := b.parts(ctx, id)
	if err := b.fs.Rename(ctx, tmp, uploadDir(id)+"/"+partName(n, etag)); err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), tmp)
		return nil, failed(err, "upload part %d of %s", n, id)
	}
	if p, ok := old[n]; ok && p.ETag != etag {
		b.fs.Remove(ctx, uploadDir(id)+"/"+partName(n, p.ETag))
	}
	return &s3.UploadPartOutput{ETag: ptr(etag)}, nil
}

// UploadPartCopy makes a part of an upload of a range of an object, by
// copy_file_range where the volume can: its data is shared, not read.
// The part's ETag is not the MD5 of its bytes (which would have to be
// read) but one of the source's ETag and the range.
func (b *Backend) UploadPartCopy(ctx context.Context, in *s3.UploadPartCopyInput) (s3response.CopyPartResult, error) {
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if _, err := b.upload(ctx, bucket, key, id); err != nil {
		return s3response.CopyPartResult{}, err
	}
	n := deref(in.PartNumber)
	if n < 1 || n > 10000 {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrInvalidPartNumberRange)
	}
	srcBucket, srcKey, version, err := backend.ParseCopySource(deref(in.CopySource))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	if version != "" {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrNoSuchVersion)
	}
	src, h, err := b.head(ctx, srcBucket, srcKey, backend.PreConditions{
		IfMatch: in.CopySourceIfMatch, IfNoneMatch: in.CopySourceIfNoneMatch,
		IfModSince: in.CopySourceIfModifiedSince, IfUnmodeSince: in.CopySourceIfUnmodifiedSince}, true)
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	if h == nil {
		return s3response.CopyPartResult{}, s3err.GetAPIError(s3err.ErrNoSuchKey) // a directory
	}
	defer h.Close()
	size := src.fi.Size()
	start, length, err := backend.ParseCopySourceRange(size, deref(in.CopySourceRange))
	if err != nil {
		return s3response.CopyPartResult{}, err
	}
	length = min(length, size-start)
	out, tmp, err := b.createTemp(ctx, uploadDir(id))
	if err != nil {
		return s3response.CopyPartResult{}, failed(err, "copy part %d of %s", n, id)
	}
	_, err = copyRange(out, 0, h, start, length)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	sum := md5.Sum(fmt.Appendf(nil, "%s %d %d", src.etag, start, length))
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	if err == nil {
		err = b.fs.Rename(ctx, tmp, uploadDir(id)+"/"+partName(n, etag))
	}
	if err != nil {
		b.fs.Remove(context.WithoutCancel(ctx), tmp)
		return s3response.CopyPartResult{}, failed(err, "copy part %d of %s", n, id)
	}
	b.removeOtherParts(ctx, id, n, etag)
	return s3response.CopyPartResult{ETag: ptr(etag), LastModified: time.Now().UTC()}, nil
}

// removeOtherParts removes the files of part n of the upload id but the
// one of ETag etag: an upload of the part again replaces it.
func (b *Backend) removeOtherParts(ctx context.Context, id string, n int32, etag string) {
	list, err := b.fs.ReadDir(ctx, uploadDir(id))
	if err != nil {
		return
	}
	for _, fi := range list {
		if m, e, ok := parsePart(fi.Name()); ok && m == n && e != etag {
			b.fs.Remove(ctx, uploadDir(id)+"/"+fi.Name())
		}
	}
}

// ListParts lists the parts of an upload.
func (b *Backend) ListParts(ctx context.Context, in *s3.ListPartsInput) (s3response.ListPartsResult, error) {
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if _, err := b.upload(ctx, bucket, key, id); err != nil {
		return s3response.ListPartsResult{}, err
	}
	parts, err := b.parts(ctx, id)
	if err != nil {
		return s3response.ListPartsResult{}, err
	}
	marker := 0
	if m := deref(in.PartNumberMarker); m != "" {
		if marker, err = strconv.Atoi(m); err != nil {
			return s3response.ListPartsResult{}, s3err.GetAPIError(s3err.ErrInvalidRequest)
		}
	}
	max := int(deref(in.MaxParts))
	if in.MaxParts == nil || max > 1000 {
		max = 1000
	}
	out := s3response.ListPartsResult{Bucket: bucket, Key: key, UploadID: id, PartNumberMarker: marker, MaxParts: max, StorageClass: "STANDARD"}
	for _, n := range sortedParts(parts) {
		if int(n) <= marker {
			continue
		}
		if len(out.Parts) == max {
			out.IsTruncated = true
			break
		}
		out.Parts = append(out.Parts, parts[n])
		out.NextPartNumberMarker = int(n)
	}
	return out, nil
}

func sortedParts(parts map[int32]s3response.Part) []int32 {
	nums := make([]int32, 0, len(parts))
	for n := range parts {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums
}

// CompleteMultipartUpload assembles the parts named into the object, at
// once: readers see the old object, or the new one whole.
func (b *Backend) CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput) (s3response.CompleteMultipartUploadResult, string, error) {
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	info, err := b.upload(ctx, bucket, key, id)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	if in.MultipartUpload == nil || len(in.MultipartUpload.Parts) == 0 {
		return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrMalformedXML)
	}
	have, err := b.parts(ctx, id)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	asked := in.MultipartUpload.Parts
	var srcs []string
	last := int32(0)
	for i, p := range asked {
		n := deref(p.PartNumber)
		if n <= last {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetAPIError(s3err.ErrInvalidPartOrder)
		}
		last = n
		got, ok := have[n]
		if !ok || !backend.AreEtagsSame(got.ETag, deref(p.ETag)) {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetInvalidPartErr(id, n, deref(p.ETag))
		}
		if i < len(asked)-1 && got.Size < backend.MinPartSize {
			return s3response.CompleteMultipartUploadResult{}, "", s3err.GetEntityTooSmallErr(got.Size, backend.MinPartSize)
		}
		srcs = append(srcs, uploadDir(id)+"/"+partName(n, got.ETag))
	}
	etag, err := backend.ComputeMultipartETagFromPartETags(asked)
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", err
	}
	result, _, err := b.copyInto(ctx, uploadDir(id), srcs, etag, objectMeta{headers: info.Headers, user: info.Metadata})
	if err == nil {
		err = b.place(ctx, result, bucket, key)
	}
	if err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", failed(err, "complete upload %s", id)
	}
	if err := b.fs.RemoveAll(ctx, uploadDir(id)); err != nil {
		return s3response.CompleteMultipartUploadResult{}, "", failed(err, "remove the parts of %s", id)
	}
	return s3response.CompleteMultipartUploadResult{Bucket: ptr(bucket), Key: ptr(key), ETag: ptr(etag)}, "", nil
}

// AbortMultipartUpload removes an upload and its parts.
func (b *Backend) AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput) error {
	bucket, key, id := deref(in.Bucket), deref(in.Key), deref(in.UploadId)
	if _, err := b.upload(ctx, bucket, key, id); err != nil {
		return err
	}
	if err := b.fs.RemoveAll(ctx, uploadDir(id)); err != nil {
		return failed(err, "abort upload %s", id)
	}
	return nil
}

// abortUploadsOf removes the uploads begun in bucket, as it goes.
func (b *Backend) abortUploadsOf(ctx context.Context, bucket string) {
	ups, _ := b.uploads(ctx)
	for _, u := range ups {
		if u.info.Bucket == bucket {
			b.fs.RemoveAll(ctx, uploadDir(u.id))
		}
	}
}

type upload struct {
	id   string
	info *uploadInfo
}

// uploads returns the uploads in progress, by key and then by ID.
func (b *Backend) uploads(ctx context.Context) ([]upload, error) {
	list, err := b.fs.ReadDir(ctx, multipartDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, failed(err, "list uploads")
	}
	var out []upload
	for _, fi := range list {
		if !fi.IsDir() {
			continue
		}
		info, err := b.readInfo(ctx, fi.Name())
		if err != nil {
			continue // being made or removed
		}
		out = append(out, upload{id: fi.Name(), info: info})
	}
	slices.SortFunc(out, func(a, c upload) int {
		if r := strings.Compare(a.info.Key, c.info.Key); r != 0 {
			return r
		}
		return strings.Compare(a.id, c.id)
	})
	return out, nil
}

// ListMultipartUploads lists the uploads in progress of a bucket.
func (b *Backend) ListMultipartUploads(ctx context.Context, in *s3.ListMultipartUploadsInput) (s3response.ListMultipartUploadsResult, error) {
	bucket := deref(in.Bucket)
	if _, err := b.statBucket(ctx, bucket); err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	ups, err := b.uploads(ctx)
	if err != nil {
		return s3response.ListMultipartUploadsResult{}, err
	}
	max := int(deref(in.MaxUploads))
	if in.MaxUploads == nil || max > 1000 {
		max = 1000
	}
	prefix, keyMarker, idMarker := deref(in.Prefix), deref(in.KeyMarker), deref(in.UploadIdMarker)
	out := s3response.ListMultipartUploadsResult{Bucket: bucket, Prefix: prefix, KeyMarker: keyMarker, UploadIDMarker: idMarker, MaxUploads: max}
	for _, u := range ups {
		k := u.info.Key
		if u.info.Bucket != bucket || !strings.HasPrefix(k, prefix) || k < keyMarker || k == keyMarker && (idMarker == "" || u.id <= idMarker) {
			continue
		}
		if len(out.Uploads) == max {
			out.IsTruncated = true
			break
		}
		out.Uploads = append(out.Uploads, s3response.Upload{Key: k, UploadID: u.id, Initiated: u.info.Initiated, StorageClass: "STANDARD"})
		out.NextKeyMarker, out.NextUploadIDMarker = k, u.id
	}
	return out, nil
}
