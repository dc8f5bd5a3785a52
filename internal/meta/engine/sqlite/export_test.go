package sqlite

import (
	"time"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// Checkpoint runs one background checkpoint of st, a Store, now.
func Checkpoint(st store.Store) { st.(*Store).checkpoint() }

// SetCheckpointEvery sets how often stores opened from now checkpoint, and
// returns a function that restores it.
func SetCheckpointEvery(d time.Duration) (restore func()) {
	old := checkpointEvery
	checkpointEvery = d
	return func() { checkpointEvery = old }
}
