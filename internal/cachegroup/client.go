package cachegroup

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// errNotHeld is a peer's answer that it has no such block (cached only)
// or object storage has none: not a fault of the peer.
var errNotHeld = errors.New("cache group: the peer has no such block")

// get fills p with bytes [off, off+len(p)) of block key from the member
// at addr; with len(p) 0 it asks the member to cache the block. It waits
// at most the group's timeout.
func (g *Group) get(ctx context.Context, addr, key string, off int, p []byte, cachedOnly bool) error {
	q := url.Values{"key": {key}, "off": {strconv.Itoa(off)}, "len": {strconv.Itoa(len(p))}}
	if cachedOnly {
		q.Set("cached", "1")
	}
	u := url.URL{Scheme: g.scheme, Host: addr, Path: blockPath, RawQuery: q.Encode()}
	ctx, cancel := context.WithTimeout(ctx, g.conf.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("cache group: %w", err)
	}
	uri := u.RequestURI()
	req.Header.Set(authHeader, g.signer.sign(uri, g.conf.Now()))
	resp, err := g.http.Do(req)
	if err != nil {
		return fmt.Errorf("cache group: ask %s for %s: %w", addr, key, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // keep the connection
		return errNotHeld
	default:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("cache group: %s answered %s for %s: %s", addr, resp.Status, key, msg)
	}
	sealed := resp.Header.Get(sealedReply) == "1"
	if sealed != (g.sealer != nil) {
		return fmt.Errorf("cache group: %s seals its replies and this member does not, or the other way round", addr)
	}
	want := len(p)
	if sealed {
		want += g.sealer.Overhead()
	}
	if resp.ContentLength != int64(want) {
		return fmt.Errorf("cache group: %s sent %d bytes for %d of %s", addr, resp.ContentLength, len(p), key)
	}
	buf := p
	if sealed {
		buf = make([]byte, want)
	}
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		return fmt.Errorf("cache group: read %s from %s: %w", key, addr, err)
	}
	if sealed {
		nonce, err := hex.DecodeString(resp.Header.Get(sealHeader))
		if err != nil || len(nonce) != g.sealer.NonceSize() {
			return fmt.Errorf("cache group: %s sent a bad nonce for %s", addr, key)
		}
		if _, err := g.sealer.Open(p[:0], nonce, buf, []byte(uri)); err != nil {
			return fmt.Errorf("cache group: %s sent %s sealed with another key, or damaged: %w", addr, key, err)
		}
	}
	sum, err := strconv.ParseUint(resp.Header.Get(sumHeader), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(p) {
		g.stats.corrupt.Add(1)
		return fmt.Errorf("cache group: %s sent %s with a bad checksum", addr, key)
	}
	return nil
}

// newTransport returns the HTTP client of a member: kept-alive
// connections to each peer, several at once for concurrent reads, over
// TLS with tc when it is not nil.
func newTransport(tc *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:     tc,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}
