package s3

import (
	"context"
	"fmt"

	"github.com/minio/minio-go/v7"
)

// RemoveBucket deletes every object and pending upload of s's bucket, then
// the bucket: tests clean up the buckets they create with it.
func RemoveBucket(ctx context.Context, s *Store) error {
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("list: %w", oi.Err)
		}
		if err := s.client.RemoveObject(ctx, s.bucket, oi.Key, minio.RemoveObjectOptions{}); err != nil {
			return err
		}
	}
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, "", true) {
		if u.Err != nil {
			return fmt.Errorf("list uploads: %w", u.Err)
		}
		if err := s.client.RemoveIncompleteUpload(ctx, s.bucket, u.Key); err != nil {
			return err
		}
	}
	return s.client.RemoveBucket(ctx, s.bucket)
}

// PendingUploads returns the keys of s's unfinished multipart uploads.
func PendingUploads(ctx context.Context, s *Store) ([]string, error) {
	var keys []string
	for u := range s.client.ListIncompleteUploads(ctx, s.bucket, "", true) {
		if u.Err != nil {
			return nil, u.Err
		}
		keys = append(keys, u.Key)
	}
	return keys, nil
}

// ETag returns the ETag of key; a multipart object's ends in -PARTS.
func ETag(ctx context.Context, s *Store, key string) (string, error) {
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
	return oi.ETag, err
}

// Bucket returns the name of s's bucket.
func Bucket(s *Store) string { return s.bucket }
