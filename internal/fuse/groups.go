package fuse

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// groupCache reads the supplementary groups of calling processes, which
// the FUSE protocol does not carry, from /proc and keeps them briefly.
type groupCache struct {
	mu sync.Mutex
	m  map[uint32]groupEntry
}

type groupEntry struct {
	gids []uint32
	at   time.Time
}

const groupTTL = time.Second

func newGroupCache() *groupCache { return &groupCache{m: map[uint32]groupEntry{}} }

func (g *groupCache) get(pid uint32) []uint32 {
	g.mu.Lock()
	e, ok := g.m[pid]
	g.mu.Unlock()
	if ok && time.Since(e.at) < groupTTL {
		return e.gids
	}
	gids, _ := readGroups(pid) // a vanished process has no groups to check
	g.mu.Lock()
	if len(g.m) > 4096 {
		clear(g.m)
	}
	g.m[pid] = groupEntry{gids: gids, at: time.Now()}
	g.mu.Unlock()
	return gids
}

func readGroups(pid uint32) ([]uint32, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		rest, ok := bytes.CutPrefix(line, []byte("Groups:"))
		if !ok {
			continue
		}
		var gids []uint32
		for _, f := range bytes.Fields(rest) {
			if n, err := strconv.ParseUint(string(f), 10, 32); err == nil {
				gids = append(gids, uint32(n))
			}
		}
		return gids, nil
	}
	return nil, nil
}
