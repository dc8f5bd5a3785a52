// Command s3gw compares the S3 gateway with a FUSE mount of the same
// volume: 1 MiB objects PUT and GET through the gateway against 1 MiB
// files written and read through the mount, then small objects and
// small files, in interleaved rounds. bench/gateway.sh sets up the
// volume, the mount and the gateway, and runs it.
//
//	s3gw -endpoint 127.0.0.1:9000 -bucket bench -mount /mnt/v/fuse [-n 256] [-small 2000] [-c 4] [-rounds 3]
//
// The access key and secret are MINIO_ROOT_USER and MINIO_ROOT_PASSWORD.
// As root, the kernel's page cache is dropped before each read phase, so
// the mount reads as the gateway does: from the client's block cache,
// not the kernel's.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func main() {
	endpoint := flag.String("endpoint", "127.0.0.1:9000", "the gateway's HOST:PORT")
	bucket := flag.String("bucket", "bench", "bucket to write in (made when missing)")
	mount := flag.String("mount", "", "directory of the mount to write in (made when missing)")
	n := flag.Int("n", 256, "1 MiB objects per round")
	small := flag.Int("small", 2000, "small objects per round")
	smallSize := flag.Int("small-size", 4096, "size of the small objects")
	conc := flag.Int("c", 4, "concurrent requests (or file writers and readers)")
	rounds := flag.Int("rounds", 3, "rounds")
	flag.Parse()
	if *mount == "" {
		log.Fatal("-mount is required")
	}
	ctx := context.Background()
	s3, err := minio.New(*endpoint, &minio.Options{Creds: credentials.NewStaticV4(os.Getenv("MINIO_ROOT_USER"), os.Getenv("MINIO_ROOT_PASSWORD"), "")})
	if err != nil {
		log.Fatal(err)
	}
	if ok, err := s3.BucketExists(ctx, *bucket); err != nil {
		log.Fatal(err)
	} else if !ok {
		if err := s3.MakeBucket(ctx, *bucket, minio.MakeBucketOptions{}); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.MkdirAll(*mount, 0o755); err != nil {
		log.Fatal(err)
	}
	big := make([]byte, 1<<20)
	for i := range big {
		big[i] = byte(i*31 + i>>11)
	}
	tiny := big[:*smallSize]

	s3put := func(prefix string, data []byte) func(int) (int, error) {
		return func(i int) (int, error) {
			_, err := s3.PutObject(ctx, *bucket, fmt.Sprintf("%s/%06d", prefix, i), bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{DisableContentSha256: true})
			return len(data), err
		}
	}
	s3get := func(prefix string) func(int) (int, error) {
		return func(i int) (int, error) {
			o, err := s3.GetObject(ctx, *bucket, fmt.Sprintf("%s/%06d", prefix, i), minio.GetObjectOptions{})
			if err != nil {
				return 0, err
			}
			defer o.Close()
			m, err := io.Copy(io.Discard, o)
			return int(m), err
		}
	}
	fsput := func(prefix string, data []byte) func(int) (int, error) {
		return func(i int) (int, error) {
			return len(data), os.WriteFile(filepath.Join(*mount, prefix, fmt.Sprintf("%06d", i)), data, 0o644)
		}
	}
	fsget := func(prefix string) func(int) (int, error) {
		return func(i int) (int, error) {
			f, err := os.Open(filepath.Join(*mount, prefix, fmt.Sprintf("%06d", i)))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			m, err := io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
			return int(m), err
		}
	}
	type phase struct {
		name string
		mb   bool // MiB/s, else operations per second
		fn   map[string]func(int) (int, error)
		n    int
	}
	results := map[string][]float64{}
	for r := range *rounds {
		prefix := fmt.Sprintf("r%d", r)
		for _, d := range []string{prefix + "big", prefix + "small"} {
			if err := os.MkdirAll(filepath.Join(*mount, d), 0o755); err != nil {
				log.Fatal(err)
			}
		}
		phases := []phase{
			{"1 MiB PUT / write", true, map[string]func(int) (int, error){"gateway": s3put(prefix+"big", big), "mount": fsput(prefix+"big", big)}, *n},
			{"1 MiB GET / read", true, map[string]func(int) (int, error){"gateway": s3get(prefix + "big"), "mount": fsget(prefix + "big")}, *n},
			{fmt.Sprintf("%d B PUT / write", *smallSize), false, map[string]func(int) (int, error){"gateway": s3put(prefix+"small", tiny), "mount": fsput(prefix+"small", tiny)}, *small},
			{fmt.Sprintf("%d B GET / read", *smallSize), false, map[string]func(int) (int, error){"gateway": s3get(prefix + "small"), "mount": fsget(prefix + "small")}, *small},
		}
		for _, p := range phases {
			for _, who := range []string{"mount", "gateway"} {
				dropCaches()
				v, err := runPhase(p.fn[who], p.n, *conc, p.mb)
				if err != nil {
					log.Fatalf("%s, %s: %v", p.name, who, err)
				}
				results[p.name+"\x00"+who] = append(results[p.name+"\x00"+who], v)
				fmt.Fprintf(os.Stderr, "round %d: %s, %s: %.1f\n", r+1, p.name, who, v)
			}
		}
	}
	fmt.Printf("| phase | gateway | mount | gateway/mount |\n| --- | ---: | ---: | ---: |\n")
	for _, name := range []string{"1 MiB PUT / write", "1 MiB GET / read", fmt.Sprintf("%d B PUT / write", *smallSize), fmt.Sprintf("%d B GET / read", *smallSize)} {
		g, m := median(results[name+"\x00gateway"]), median(results[name+"\x00mount"])
		unit := "MiB/s"
		if !slices.Contains([]string{"1 MiB PUT / write", "1 MiB GET / read"}, name) {
			unit = "/s"
		}
		fmt.Printf("| %s (%s) | %.1f | %.1f | %.2f |\n", name, unit, g, m, g/m)
	}
}

// runPhase runs fn for 0..n-1 on c workers and returns MiB/s (mb) or
// calls per second.
func runPhase(fn func(int) (int, error), n, c int, mb bool) (float64, error) {
	var next atomic.Int64
	var bytes atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				m, err := fn(i)
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
				bytes.Add(int64(m))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	if mb {
		return float64(bytes.Load()) / (1 << 20) / el, first
	}
	return float64(n) / el, first
}

// dropCaches drops the kernel's page cache, where it may (as root).
func dropCaches() {
	drop := func() error {
		f, err := os.OpenFile("/proc/sys/vm/drop_caches", os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("3\n")
		return err
	}
	drop() // not root: the mount may read from the kernel's cache
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
