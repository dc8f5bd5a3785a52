package encrypt

import (
	"crypto/rand"
	"crypto/rsa"
	"testing"
)

// BenchmarkSeal and BenchmarkOpen measure the encryption of one 4 MiB
// block, RSA wrapping of its data key included.
func BenchmarkSeal(b *testing.B) {
	for _, algo := range Algorithms {
		b.Run(algo, func(b *testing.B) {
			s := benchStore(b, algo)
			data := make([]byte, 4<<20)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := s.seal(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	for _, algo := range Algorithms {
		b.Run(algo, func(b *testing.B) {
			s := benchStore(b, algo)
			data := make([]byte, 4<<20)
			stored, err := s.seal(data)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := s.open(stored); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchStore returns a Store with a fresh 2048-bit key and no inner store.
func benchStore(b *testing.B, algo string) *Store {
	b.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(nil, key, algo)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
