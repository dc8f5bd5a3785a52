package e2e

import "math/rand/v2"

// rng is a seeded generator, so a failing case can be replayed.
type rng struct{ r *rand.Rand }

func newRand(seed uint64) *rng { return &rng{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))} }

func (g *rng) Intn(n int) int { return g.r.IntN(n) }

func (g *rng) bytes(n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := g.r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
