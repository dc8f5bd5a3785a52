package sqlite

import "time"

// SetCheckpointEvery sets how often stores opened from now checkpoint, and
// returns a function that restores it.
func SetCheckpointEvery(d time.Duration) (restore func()) {
	old := checkpointEvery
	checkpointEvery = d
	return func() { checkpointEvery = old }
}
