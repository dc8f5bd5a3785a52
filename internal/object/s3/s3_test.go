package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicefs/sluice/internal/object"
	"github.com/sluicefs/sluice/internal/object/conformance"
	"github.com/sluicefs/sluice/internal/object/objecttest"
	"github.com/sluicefs/sluice/internal/object/s3"
	"github.com/sluicefs/sluice/internal/testserver"
)

// serverConfig returns the Config of the test server's bucket, with 5 MiB
// parts so that multipart uploads happen on small data.
func serverConfig(t testing.TB) s3.Config {
	t.Helper()
	cfg, err := s3.ParseURL(testserver.URL(t, testserver.S3))
	if err != nil {
		t.Fatalf("%s: %v", testserver.S3, err)
	}
	cfg.PartSize = s3.MinPartSize
	return cfg
}

// randomName returns prefix followed by random hex digits.
func randomName(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// freshStore creates a new, empty bucket on the test server and removes it
// with everything in it when t ends.
func freshStore(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	cfg.Bucket = randomName("sluice-t-")
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx); err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		if err := s3.RemoveBucket(ctx, s); err != nil {
			t.Errorf("remove bucket %s: %v", s, err)
		}
	})
	return s
}

func TestSuite(t *testing.T) {
	cfg := serverConfig(t)
	objecttest.RunConfig(t, conformance.Config{ExactSizes: true}, func(t *testing.T) object.Store { return freshStore(t, cfg) })
}

func TestMultipart(t *testing.T) {
	s := freshStore(t, serverConfig(t))
	ctx := context.Background()
	tests := []struct {
		name  string
		size  int
		parts string // ETag suffix; "" for a single PUT
	}{
		{"onePart", s3.MinPartSize, ""},
		{"threeParts", 12 << 20, "-3"},
		{"twoFullParts", 2 * s3.MinPartSize, "-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := objecttest.Data(7, tt.size)
			// A reader without Len makes Put stream.
			if err := s.Put(ctx, tt.name, struct{ *bytes.Reader }{bytes.NewReader(data)}); err != nil {
				t.Fatal(err)
			}
			etag, err := s3.ETag(ctx, s, tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if tt.parts == "" && strings.Contains(etag, "-") || tt.parts != "" && !strings.HasSuffix(etag, tt.parts) {
				t.Errorf("ETag %q: want a %q upload", etag, cmp(tt.parts, "single PUT"))
			}
			if got := objecttest.Get(t, s, tt.name, 0, -1); !bytes.Equal(got, data) {
				t.Errorf("Get returned %d bytes that differ from the %d put", len(got), len(data))
			}
		})
	}
	// A failed multipart upload is aborted: nothing is left pending.
	if err := s.Put(ctx, "failed", &failAfter{n: 11 << 20}); err == nil {
		t.Fatal("Put with a failing reader succeeded")
	}
	if pending, err := s3.PendingUploads(ctx, s); err != nil || len(pending) != 0 {
		t.Errorf("pending uploads after a failed Put = %q, %v; want none", pending, err)
	}
}

// cmp returns a if it is not empty, else b.
func cmp(a, b string) string {
	if a != "" {
		return "multipart " + a
	}
	return b
}

// failAfter yields n zero bytes, then an error.
type failAfter struct{ n int }

func (r *failAfter) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, errors.New("injected read failure")
	}
	n := min(len(p), r.n)
	clear(p[:n])
	r.n -= n
	return n, nil
}

func TestListPagination(t *testing.T) {
	s := freshStore(t, serverConfig(t))
	ctx := context.Background()
	const n = 1234 // more than one ListObjectsV2 page of 1000
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("k/%05d", i))
	}
	var wg sync.WaitGroup
	keys := make(chan string)
	for range 8 {
		wg.Go(func() {
			for k := range keys {
				if err := s.Put(ctx, k, strings.NewReader(k)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, k := range want {
		keys <- k
	}
	close(keys)
	wg.Wait()
	objecttest.Put(t, s, "l", nil)
	tests := []struct {
		marker string
		limit  int
		want   []string
	}{
		{"", 0, want},
		{"", 1100, want[:1100]},
		{"", 1000, want[:1000]},
		{want[999], 0, want[1000:]},
		{want[10], 1050, want[11:1061]},
		{want[n-1], 0, nil},
	}
	for _, tt := range tests {
		infos, err := s.List(ctx, "k/", tt.marker, tt.limit)
		if err != nil {
			t.Fatalf("List(k/, %q, %d): %v", tt.marker, tt.limit, err)
		}
		got := make([]string, len(infos))
		for i, info := range infos {
			got[i] = info.Key
			if info.Size != int64(len(info.Key)) {
				t.Errorf("List: %s has size %d, want %d", info.Key, info.Size, len(info.Key))
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("List(k/, %q, %d) = %d keys, want %d", tt.marker, tt.limit, len(got), len(tt.want))
		}
	}
}

func TestCreate(t *testing.T) {
	cfg := serverConfig(t)
	cfg.Bucket = randomName("sluice-c-")
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.List(ctx, "", "", 1); !errors.Is(err, s3.ErrBucketNotFound) {
		t.Fatalf("List before Create: error = %v, want ErrBucketNotFound", err)
	}
	for range 2 { // creating an existing bucket is not an error
		if err := s.Create(ctx); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	t.Cleanup(func() {
		if err := s3.RemoveBucket(ctx, s); err != nil {
			t.Errorf("remove bucket: %v", err)
		}
	})
	objecttest.Put(t, s, "k", []byte("v"))
	if got := objecttest.Get(t, s, "k", 0, -1); string(got) != "v" {
		t.Errorf("Get = %q, want v", got)
	}
}

func TestMissingBucket(t *testing.T) {
	cfg := serverConfig(t)
	cfg.Bucket = randomName("sluice-missing-")
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	checkErr(t, "Put", s.Put(ctx, "k", strings.NewReader("v")), s3.ErrBucketNotFound, cfg)
	_, err = s.Get(ctx, "k", 0, -1)
	checkErr(t, "Get", err, s3.ErrBucketNotFound, cfg)
	_, err = s.List(ctx, "", "", 0)
	checkErr(t, "List", err, s3.ErrBucketNotFound, cfg)
	if errors.Is(err, object.ErrNotFound) {
		t.Errorf("a missing bucket is reported as a missing key: %v", err)
	}
}

func TestBadCredentials(t *testing.T) {
	good := serverConfig(t)
	s := freshStore(t, good)
	objecttest.Put(t, s, "k", []byte("v"))
	tests := []struct {
		name                 string
		access, secret, sess string
	}{
		{"wrongSecret", good.AccessKey, "not-the-secret-0123456789", ""},
		{"unknownKey", "nosuchuser", "not-the-secret-0123456789", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			cfg.Bucket = s3.Bucket(s)
			cfg.AccessKey, cfg.SecretKey, cfg.SessionToken = tt.access, tt.secret, tt.sess
			bad, err := s3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			_, err = bad.Get(ctx, "k", 0, -1)
			checkErr(t, "Get", err, s3.ErrAccessDenied, cfg)
			checkErr(t, "Put", bad.Put(ctx, "k2", strings.NewReader("v")), s3.ErrAccessDenied, cfg)
			_, err = bad.List(ctx, "", "", 0)
			checkErr(t, "List", err, s3.ErrAccessDenied, cfg)
			checkErr(t, "Create", bad.Create(ctx), s3.ErrAccessDenied, cfg)
		})
	}
}

func TestUnreachable(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg, err := s3.ParseURL("http://someone:secret-not-shown@" + addr + "/bucket")
	if err != nil {
		t.Fatal(err)
	}
	s, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = s.Get(ctx, "k", 0, -1)
	checkErr(t, "Get", err, s3.ErrUnreachable, cfg)
	checkErr(t, "Create", s.Create(ctx), s3.ErrUnreachable, cfg)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("failing on an unreachable endpoint took %v", d)
	}
}

// checkErr fails t unless err wraps want in one line that names the
// endpoint and holds no secret.
func checkErr(t *testing.T, op string, err, want error, cfg s3.Config) {
	t.Helper()
	switch {
	case !errors.Is(err, want):
		t.Errorf("%s: error = %v, want %v", op, err, want)
	case strings.Contains(err.Error(), "\n"):
		t.Errorf("%s: error has several lines: %q", op, err)
	case !strings.Contains(err.Error(), cfg.Endpoint):
		t.Errorf("%s: error %q does not name the endpoint %s", op, err, cfg.Endpoint)
	case cfg.SecretKey != "" && strings.Contains(err.Error(), cfg.SecretKey):
		t.Errorf("%s: error %q shows the secret key", op, err)
	}
}

// loopbackTransport sends every request to 127.0.0.1, whatever the host
// name: it lets a virtual-host bucket (BUCKET.localhost) reach the test
// server without DNS.
func loopbackTransport() http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	var d net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	return tr
}

func TestVirtualHost(t *testing.T) {
	path := serverConfig(t)
	domain := testserver.URL(t, testserver.S3VirtualDomain)
	s := freshStore(t, path)
	bucket := s3.Bucket(s)
	_, port, err := net.SplitHostPort(path.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := s3.ParseURL(fmt.Sprintf("http://%s.%s:%s", bucket, domain, port))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.VirtualHost || cfg.Bucket != bucket {
		t.Fatalf("ParseURL gave %+v, want virtual-host bucket %s", cfg, bucket)
	}
	cfg.AccessKey, cfg.SecretKey, cfg.Transport = path.AccessKey, path.SecretKey, loopbackTransport()
	vh, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	objecttest.Put(t, vh, "via/vhost", []byte("virtual"))
	if got := objecttest.Get(t, s, "via/vhost", 0, -1); string(got) != "virtual" {
		t.Errorf("path-style Get of an object put virtual-host style = %q", got)
	}
	infos, err := vh.List(context.Background(), "", "", 0)
	if err != nil || len(infos) != 1 {
		t.Errorf("virtual-host List = %v, %v; want one object", infos, err)
	}
}

// throttlingTransport answers the first n requests with 503 SlowDown, as a
// busy S3 service does, and passes the rest to the real server.
type throttlingTransport struct {
	mu    sync.Mutex
	n     int
	inner http.RoundTripper
}

func (tr *throttlingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tr.mu.Lock()
	throttle := tr.n > 0
	tr.n--
	tr.mu.Unlock()
	if !throttle {
		return tr.inner.RoundTrip(req)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
	return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Slow Down", Proto: "HTTP/1.1",
		ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/xml"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
}

func TestTransientErrors(t *testing.T) {
	cfg := serverConfig(t)
	s := freshStore(t, cfg)
	tr := &throttlingTransport{n: 4, inner: http.DefaultTransport}
	cfg.Bucket, cfg.Transport = s3.Bucket(s), tr
	busy, err := s3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = busy.Get(ctx, "k", 0, -1)
	checkErr(t, "Get", err, object.ErrTransient, cfg)
	checkErr(t, "Put", busy.Put(ctx, "k", strings.NewReader("v")), object.ErrTransient, cfg)
	_, err = busy.Head(ctx, "k")
	checkErr(t, "Head", err, object.ErrTransient, cfg)
	_, err = busy.List(ctx, "", "", 0)
	checkErr(t, "List", err, object.ErrTransient, cfg)
	// The client library does not retry by itself: once the service
	// recovers, the next call goes through.
	objecttest.Put(t, busy, "k", []byte("v"))
	if got := objecttest.Get(t, s, "k", 0, -1); string(got) != "v" {
		t.Errorf("Get = %q, want v", got)
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		url                       string
		endpoint, bucket, region  string
		secure, vhost             bool
		access, secret, canonical string
	}{
		{url: "http://127.0.0.1:9000/mybucket", endpoint: "127.0.0.1:9000", bucket: "mybucket", region: "us-east-1",
			canonical: "http://127.0.0.1:9000/mybucket/"},
		{url: "http://ak:sk@127.0.0.1:9000/b/?region=eu-west-1", endpoint: "127.0.0.1:9000", bucket: "b",
			region: "eu-west-1", access: "ak", secret: "sk", canonical: "http://127.0.0.1:9000/b/"},
		{url: "https://mybucket.s3.us-west-2.amazonaws.com", endpoint: "s3.us-west-2.amazonaws.com", bucket: "mybucket",
			region: "us-west-2", secure: true, vhost: true, canonical: "https://mybucket.s3.us-west-2.amazonaws.com/"},
		{url: "https://my.dotted.bucket.s3.amazonaws.com", endpoint: "s3.amazonaws.com", bucket: "my.dotted.bucket",
			region: "us-east-1", secure: true, vhost: true},
		{url: "https://b.s3-eu-central-1.amazonaws.com", endpoint: "s3-eu-central-1.amazonaws.com", bucket: "b",
			region: "eu-central-1", secure: true, vhost: true},
		{url: "https://b.s3.dualstack.ap-south-1.amazonaws.com", endpoint: "s3.dualstack.ap-south-1.amazonaws.com",
			bucket: "b", region: "ap-south-1", secure: true, vhost: true},
		{url: "https://data.storage.example.com:8443?region=r1", endpoint: "storage.example.com:8443", bucket: "data",
			region: "r1", secure: true, vhost: true, canonical: "https://data.storage.example.com:8443/"},
		{url: "minio.local:9000/vol", endpoint: "minio.local:9000", bucket: "vol", region: "us-east-1", secure: true},
		{url: "https://s3.example.com/bucket", endpoint: "s3.example.com", bucket: "bucket", region: "us-east-1", secure: true},
		{url: ""},
		{url: "ftp://host/bucket"},
		{url: "http://127.0.0.1:9000"},
		{url: "http://127.0.0.1:9000/"},
		{url: "http://localhost:9000"},
		{url: "http://host/bucket/sub/dir"},
		{url: "http://host/bucket?regoin=x"},
		{url: "http://[::1]:9000"},
	}
	for _, tt := range tests {
		c, err := s3.ParseURL(tt.url)
		if tt.bucket == "" {
			if err == nil {
				t.Errorf("ParseURL(%q) = %+v, want an error", tt.url, c)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tt.url, err)
			continue
		}
		if c.Endpoint != tt.endpoint || c.Bucket != tt.bucket || c.Region != tt.region || c.Secure != tt.secure ||
			c.VirtualHost != tt.vhost || c.AccessKey != tt.access || c.SecretKey != tt.secret {
			t.Errorf("ParseURL(%q) = %+v, want endpoint %s bucket %s region %s secure %v vhost %v keys %q/%q",
				tt.url, c, tt.endpoint, tt.bucket, tt.region, tt.secure, tt.vhost, tt.access, tt.secret)
		}
		if tt.canonical != "" && c.URL() != tt.canonical {
			t.Errorf("ParseURL(%q).URL() = %q, want %q", tt.url, c.URL(), tt.canonical)
		}
	}
}

func TestParseURLHidesSecret(t *testing.T) {
	_, err := s3.ParseURL("http://ak:topsecret@host:bad/b")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("ParseURL error = %v, want an error without the secret", err)
	}
}

func BenchmarkStore(b *testing.B) {
	objecttest.Bench(b, freshStore(b, serverConfig(b)))
}

// headerLog records the content-hash header of each PUT, and flips one
// byte of the body of each PUT when corrupt is set.
type headerLog struct {
	mu      sync.Mutex
	hashes  []string
	trailer []string
	corrupt bool
	next    http.RoundTripper
}

func (h *headerLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0 { // objects and parts, not the bucket
		h.mu.Lock()
		h.hashes = append(h.hashes, r.Header.Get("X-Amz-Content-Sha256"))
		// The CRC goes as a trailer when the body streams, as a header
		// when the client could compute it first.
		h.trailer = append(h.trailer, r.Header.Get("X-Amz-Trailer")+r.Header.Get("X-Amz-Checksum-Crc32c"))
		corrupt := h.corrupt
		h.mu.Unlock()
		if corrupt && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			body[len(body)/2] ^= 0x20 // inside the data, past the first chunk's header
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
	}
	return h.next.RoundTrip(r)
}

// TestPutChecksum checks that bodies go unsigned with a CRC-32C, single
// PUTs and parts alike: in a header for a single PUT (a block, whose body
// is at hand), in a trailer for the parts of a streamed multipart upload.
// And that the server refuses a body damaged on the way: the checksum is
// what keeps a block whole.
func TestPutChecksum(t *testing.T) {
	cfg := serverConfig(t)
	log := &headerLog{next: http.DefaultTransport}
	cfg.Transport = log
	s := freshStore(t, cfg)
	ctx := context.Background()
	small := bytes.Repeat([]byte("s"), 100<<10)
	big := bytes.Repeat([]byte("b"), 2*s3.MinPartSize+1000)
	for _, data := range [][]byte{small, big} {
		if err := s.Put(ctx, "k", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	log.mu.Lock()
	for i, h := range log.hashes {
		trailer := strings.Contains(strings.ToLower(log.trailer[i]), "crc32c")
		header := log.trailer[i] != "" && !trailer
		if !(h == "STREAMING-UNSIGNED-PAYLOAD-TRAILER" && trailer) && !(h == "UNSIGNED-PAYLOAD" && header) {
			t.Errorf("PUT %d: content hash %q, trailer %q; want an unsigned body with a CRC-32C", i, h, log.trailer[i])
		}
		if i == 0 && !header {
			t.Errorf("the single PUT of a body at hand has its CRC-32C in a trailer (%q), not a header", log.trailer[i])
		}
	}
	if len(log.hashes) < 4 {
		t.Errorf("%d PUTs for a small object and a multipart one", len(log.hashes))
	}
	log.corrupt = true
	log.mu.Unlock()
	if err := s.Put(ctx, "bad", bytes.NewReader(small)); err == nil {
		rc, err := s.Get(ctx, "bad", 0, -1)
		if err == nil {
			got, _ := io.ReadAll(rc)
			rc.Close()
			t.Fatalf("a body damaged in transit was stored (%d bytes, intact: %v)", len(got), bytes.Equal(got, small))
		}
	}
}

// refuseUnsigned answers 501 NotImplemented, as an older S3 server does,
// to a PUT whose body is unsigned.
type refuseUnsigned struct {
	refused int
	hashes  []string
	next    http.RoundTripper
}

func (f *refuseUnsigned) RoundTrip(r *http.Request) (*http.Response, error) {
	h := r.Header.Get("X-Amz-Content-Sha256")
	if r.Method == http.MethodPut && strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0 {
		f.hashes = append(f.hashes, h)
		if strings.Contains(h, "UNSIGNED") {
			f.refused++
			if r.Body != nil {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>unsigned payload</Message></Error>`
			return &http.Response{StatusCode: http.StatusNotImplemented, Status: "501 Not Implemented",
				Header: http.Header{"Content-Type": {"application/xml"}}, Body: io.NopCloser(strings.NewReader(body)),
				ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
		}
	}
	return f.next.RoundTrip(r)
}

// TestSignedBodiesWhenRefused checks that a server refusing unsigned
// bodies gets the same objects with signed ones, from the first refusal
// on.
func TestSignedBodiesWhenRefused(t *testing.T) {
	cfg := serverConfig(t)
	f := &refuseUnsigned{next: http.DefaultTransport}
	cfg.Transport = f
	s := freshStore(t, cfg)
	ctx := context.Background()
	data := bytes.Repeat([]byte("x"), 70<<10)
	for _, key := range []string{"a", "b"} {
		if err := s.Put(ctx, key, bytes.NewReader(data)); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		rc, err := s.Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: %d bytes back", key, len(got))
		}
	}
	if f.refused != 1 {
		t.Fatalf("unsigned bodies refused %d times (PUTs: %q), want once", f.refused, f.hashes)
	}
}
