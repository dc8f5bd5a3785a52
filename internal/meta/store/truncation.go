package store

// Truncation records a file shrunk past many chunks: its chunks from index
// From on lie beyond the new end and are dropped in later, bounded
// transactions. The record is written in the transaction that changes the
// length and removed with the last of those chunks.
type Truncation struct {
	Ino  Ino
	From uint32
}
