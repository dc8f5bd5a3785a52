package cachegroup

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxSkew bounds how far the time a request was signed at may be from
// the serving member's clock.
const MaxSkew = 5 * time.Minute

// authHeader carries a request's signature: "UNIX-MILLIS:HEX-HMAC".
const authHeader = "Sluice-Group-Auth"

// DeriveKey returns the key of cache group name of a volume, from the
// volume's UUID, its object storage secret key and its encryption key
// (PEM, possibly empty): what only those who can read the volume's
// settings know. Each field is length-prefixed, so no two settings give
// the same input.
func DeriveKey(uuid, secretKey, encryptKey, name string) []byte {
	mac := hmac.New(sha256.New, []byte("sluice cache group v1"))
	for _, s := range []string{uuid, secretKey, encryptKey, name} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		mac.Write(n[:])
		mac.Write([]byte(s))
	}
	return mac.Sum(nil)
}

// subKey derives the key of one use (signing, sealing) from the group's.
func subKey(key []byte, use string) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(use))
	return mac.Sum(nil)
}

// signer signs and checks requests.
type signer struct{ key []byte }

func newSigner(key []byte) signer { return signer{subKey(key, "request")} }

func (s signer) mac(what string, at int64) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strconv.FormatInt(at, 10)))
	m.Write([]byte{'\n'})
	m.Write([]byte(what))
	return m.Sum(nil)
}

// sign returns the header value that authorizes the request what at now.
func (s signer) sign(what string, now time.Time) string {
	at := now.UnixMilli()
	return strconv.FormatInt(at, 10) + ":" + hex.EncodeToString(s.mac(what, at))
}

// errUnauthorized is what check returns for any request it refuses.
var errUnauthorized = errors.New("cache group: request not signed with the group's key")

// check verifies header v of the request what, received at now.
func (s signer) check(what, v string, now time.Time) error {
	ts, sig, ok := strings.Cut(v, ":")
	if !ok {
		return errUnauthorized
	}
	at, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errUnauthorized
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.mac(what, at)) {
		return errUnauthorized
	}
	if d := now.Sub(time.UnixMilli(at)); d > MaxSkew || d < -MaxSkew {
		return fmt.Errorf("%w: signed %v from this host's clock", errUnauthorized, d.Round(time.Second))
	}
	return nil
}

// newSealer returns the AEAD replies are sealed with.
func newSealer(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(subKey(key, "seal"))
	if err != nil {
		return nil, fmt.Errorf("cache group: %w", err)
	}
	a, err := cipher.NewGCM(b)
	if err != nil {
		return nil, fmt.Errorf("cache group: %w", err)
	}
	return a, nil
}
