package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/minio/minio-go/v7"
)

// BenchmarkGateway measures PUT and GET through the gateway, client and
// server in this process, over a volume on SQLite and a local bucket;
// bench/gateway.sh compares the gateway with a FUSE mount.
func BenchmarkGateway(b *testing.B) {
	e := start(b)
	ctx := context.Background()
	if err := e.s3.MakeBucket(ctx, "bench", minio.MakeBucketOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{4 << 10, 1 << 20} {
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		b.Run(fmt.Sprintf("PUT/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				if _, err := e.s3.PutObject(ctx, "bench", fmt.Sprintf("%d/%d", size, i), bytes.NewReader(data), int64(size), minio.PutObjectOptions{DisableContentSha256: true}); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("GET/%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(size))
			i := 0
			for b.Loop() {
				o, err := e.s3.GetObject(ctx, "bench", fmt.Sprintf("%d/%d", size, i%100), minio.GetObjectOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if n, err := io.Copy(io.Discard, o); err != nil || n != int64(size) {
					b.Fatalf("GET: %d bytes, %v", n, err)
				}
				o.Close()
				i++
			}
		})
	}
}
