package cachegroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"net/http"
	"strconv"

	"github.com/sluicefs/sluice/internal/chunk"
	"github.com/sluicefs/sluice/internal/object"
)

// Blocks is what a member serves its peers from: its chunk store.
type Blocks interface {
	// ServeBlock calls send with bytes [off, off+n) of block key, from
	// the member's caches or, unless cachedOnly, fetched from object
	// storage (once for concurrent requests) and cached; with n 0 it
	// only makes sure the block is cached. A block in neither place
	// gives an error wrapping object.ErrNotFound.
	ServeBlock(ctx context.Context, key string, off, n int, cachedOnly bool, send func([]byte) error) error
}

// The protocol: GET /block?key=K&off=O&len=N[&cached=1], signed (see
// signer) over the request URI. A 200 reply carries the bytes, sealed
// when the group seals (nonce in sealHeader, the request URI as
// additional data), and the CRC-32 (IEEE) of the plain bytes in
// sumHeader: on x86 with PCLMULQDQ it runs at twice the speed of CRC32C,
// and each side checksums every byte it sends or receives.
const (
	blockPath   = "/block"
	sumHeader   = "Sluice-Sum"
	sealHeader  = "Sluice-Nonce"
	sealedReply = "Sluice-Sealed"
)

// ServeHTTP answers a peer's request.
func (g *Group) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != blockPath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	uri := r.URL.RequestURI()
	if err := g.signer.check(uri, r.Header.Get(authHeader), g.conf.Now()); err != nil {
		g.stats.refused.Add(1)
		g.log.Warn("cache group: refused a request", "from", r.RemoteAddr, "err", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	q := r.URL.Query()
	key := q.Get("key")
	ref, err := chunk.ParseBlockKey(key)
	off, err1 := strconv.Atoi(q.Get("off"))
	n, err2 := strconv.Atoi(q.Get("len"))
	if err != nil || err1 != nil || err2 != nil || off < 0 || n < 0 || off+n > ref.Len {
		http.Error(w, "bad block request", http.StatusBadRequest)
		return
	}
	g.stats.served.Add(1)
	err = g.blocks.ServeBlock(r.Context(), key, off, n, q.Get("cached") == "1", func(b []byte) error {
		return g.reply(w, uri, b)
	})
	switch {
	case err == nil:
	case errors.Is(err, object.ErrNotFound):
		http.Error(w, "block not found", http.StatusNotFound)
	default:
		g.log.Warn("cache group: serving a block", "key", key, "err", err)
		http.Error(w, "block not served", http.StatusBadGateway)
	}
}

// reply writes b, sealed when the group seals.
func (g *Group) reply(w http.ResponseWriter, uri string, b []byte) error {
	h := w.Header()
	h.Set(sumHeader, strconv.FormatUint(uint64(crc32.ChecksumIEEE(b)), 16))
	if g.sealer != nil {
		nonce := make([]byte, g.sealer.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return err
		}
		h.Set(sealHeader, hex.EncodeToString(nonce))
		h.Set(sealedReply, "1")
		b = g.sealer.Seal(nil, nonce, b, []byte(uri))
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if _, err := w.Write(b); err != nil {
		return err
	}
	g.stats.servedBytes.Add(uint64(len(b)))
	return nil
}
