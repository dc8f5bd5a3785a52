package encrypt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509/pkix"
	"encoding/asn1"
	"fmt"
	"hash"
)

// Object identifiers of encrypted PKCS#8 (RFC 5958, RFC 8018).
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// encryptedPrivateKeyInfo is the outer structure of an encrypted PKCS#8
// key.
type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

// pbes2Params are the parameters of PBES2.
type pbes2Params struct {
	KDF pkix.AlgorithmIdentifier
	Enc pkix.AlgorithmIdentifier
}

// pbkdf2Params are the parameters of PBKDF2; a missing PRF means
// HMAC-SHA1.
type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an encrypted PKCS#8 key (PBES2 with PBKDF2 and
// AES-CBC or 3DES-CBC) and returns the plain PKCS#8 DER. A wrong
// passphrase is reported as ErrPassphrase when the padding shows it.
func decryptPKCS8(der, passphrase []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if err := unmarshal(der, &info); err != nil {
		return nil, fmt.Errorf("%w: encrypted PKCS#8: %w", ErrBadPEM, err)
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("%w: encrypted PKCS#8 scheme %v is not supported (only PBES2)", ErrBadPEM, info.Algo.Algorithm)
	}
	var params pbes2Params
	if err := unmarshal(info.Algo.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("%w: PBES2 parameters: %w", ErrBadPEM, err)
	}
	newBlock, keyLen, err := blockCipher(params.Enc.Algorithm)
	if err != nil {
		return nil, err
	}
	var iv []byte
	if err := unmarshal(params.Enc.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("%w: cipher IV: %w", ErrBadPEM, err)
	}
	key, err := deriveKey(params.KDF, passphrase, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadPEM, err)
	}
	data := info.Data
	if len(iv) != block.BlockSize() || len(data) == 0 || len(data)%block.BlockSize() != 0 {
		return nil, fmt.Errorf("%w: encrypted PKCS#8 data of %d bytes with an IV of %d", ErrBadPEM, len(data), len(iv))
	}
	plain := make([]byte, len(data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, data)
	// PKCS#7 padding: n bytes of value n.
	n := int(plain[len(plain)-1])
	if n == 0 || n > block.BlockSize() {
		return nil, ErrPassphrase
	}
	for _, b := range plain[len(plain)-n:] {
		if int(b) != n {
			return nil, ErrPassphrase
		}
	}
	return plain[:len(plain)-n], nil
}

// unmarshal parses der into v and rejects trailing bytes.
func unmarshal(der []byte, v any) error {
	rest, err := asn1.Unmarshal(der, v)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d trailing bytes", len(rest))
	}
	return nil
}

// blockCipher returns the constructor and key length of a PBES2
// encryption scheme.
func blockCipher(oid asn1.ObjectIdentifier) (func([]byte) (cipher.Block, error), int, error) {
	switch {
	case oid.Equal(oidAES128CBC):
		return aes.NewCipher, 16, nil
	case oid.Equal(oidAES192CBC):
		return aes.NewCipher, 24, nil
	case oid.Equal(oidAES256CBC):
		return aes.NewCipher, 32, nil
	case oid.Equal(oidDESEDE3CBC):
		return des.NewTripleDESCipher, 24, nil
	}
	return nil, 0, fmt.Errorf("%w: PBES2 cipher %v is not supported", ErrBadPEM, oid)
}

// deriveKey runs PBKDF2 as kdf describes.
func deriveKey(kdf pkix.AlgorithmIdentifier, passphrase []byte, keyLen int) ([]byte, error) {
	if !kdf.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("%w: key derivation %v is not supported (only PBKDF2)", ErrBadPEM, kdf.Algorithm)
	}
	var p pbkdf2Params
	if err := unmarshal(kdf.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("%w: PBKDF2 parameters: %w", ErrBadPEM, err)
	}
	if p.KeyLength != 0 && p.KeyLength != keyLen {
		return nil, fmt.Errorf("%w: PBKDF2 key length %d, cipher needs %d", ErrBadPEM, p.KeyLength, keyLen)
	}
	var h func() hash.Hash
	switch prf := p.PRF.Algorithm; {
	case len(prf) == 0 || prf.Equal(oidHMACSHA1):
		h = sha1.New
	case prf.Equal(oidHMACSHA224):
		h = sha256.New224
	case prf.Equal(oidHMACSHA256):
		h = sha256.New
	case prf.Equal(oidHMACSHA384):
		h = sha512.New384
	case prf.Equal(oidHMACSHA512):
		h = sha512.New
	default:
		return nil, fmt.Errorf("%w: PBKDF2 PRF %v is not supported", ErrBadPEM, prf)
	}
	if p.Iterations < 1 || p.Iterations > 10_000_000 {
		return nil, fmt.Errorf("%w: PBKDF2 iteration count %d", ErrBadPEM, p.Iterations)
	}
	key, err := pbkdf2.Key(h, string(passphrase), p.Salt, p.Iterations, keyLen)
	if err != nil {
		return nil, fmt.Errorf("%w: PBKDF2: %w", ErrBadPEM, err)
	}
	return key, nil
}
