package volume

import (
	"testing"

	"github.com/sluicefs/sluice/internal/meta"
)

// TestChunkConfigLocalBuckets checks the caching a volume decides from
// its storage: a bucket on this host with plain blocks is read without
// copies in the disk cache; elsewhere, or with blocks to decode, fetched
// blocks go to the disk cache.
func TestChunkConfigLocalBuckets(t *testing.T) {
	for _, tc := range []struct {
		storage, compression  string
		partialOnly, toMemory bool
	}{
		{"file", "", true, true},
		{"mem", "", true, true},
		{"file", "lz4", true, false},
		{"s3", "", false, false},
		{"minio", "", false, false},
	} {
		c := chunkConfig(&meta.Format{Storage: tc.storage, Compression: tc.compression, BlockSize: 4096}, &Options{})
		if c.CachePartialOnly != tc.partialOnly || c.FetchToMemory != tc.toMemory {
			t.Errorf("%s, compression %q: CachePartialOnly %v, FetchToMemory %v; want %v, %v",
				tc.storage, tc.compression, c.CachePartialOnly, c.FetchToMemory, tc.partialOnly, tc.toMemory)
		}
	}
}
