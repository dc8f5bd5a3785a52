package wire

// Range is the keys Begin <= key < End; a nil End is unbounded.
type Range struct {
	Begin, End []byte
}

// Write is one write of a commit.
type Write struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Commit is the body of OpCommit.
type Commit struct {
	Snap   uint64 // snapshot the transaction read; 0 when it read nothing
	Client uint64 // with Txn, names the transaction so a retry is applied once
	Txn    uint64
	Reads  [][]byte
	Ranges []Range
	Writes []Write
	// Session and Call, when Session is not 0, name the call of a mount
	// whose effect this commit is (see store.WithCall); they travel
	// after the writes, so a body without them decodes as before.
	Session, Call uint64
}

// Range appends r.
func (b *Buf) Range(r Range) {
	b.Bytes(r.Begin)
	if r.End == nil {
		b.Byte(0)
		return
	}
	b.Byte(1)
	b.Bytes(r.End)
}

// Range reads a range.
func (r *Reader) Range() Range {
	out := Range{Begin: r.Bytes()}
	if r.Byte() == 1 {
		out.End = r.Bytes()
		if out.End == nil && r.err == nil {
			out.End = []byte{}
		}
	}
	return out
}

// Encode appends c to b.
func (c *Commit) Encode(b *Buf) {
	b.U64(c.Snap)
	b.U64(c.Client)
	b.U64(c.Txn)
	b.Uvarint(uint64(len(c.Reads)))
	for _, k := range c.Reads {
		b.Bytes(k)
	}
	b.Uvarint(uint64(len(c.Ranges)))
	for _, r := range c.Ranges {
		b.Range(r)
	}
	EncodeWrites(b, c.Writes)
	if c.Session != 0 {
		b.U64(c.Session)
		b.U64(c.Call)
	}
}

// EncodeWrites appends a count and ws.
func EncodeWrites(b *Buf, ws []Write) {
	b.Uvarint(uint64(len(ws)))
	for _, w := range ws {
		b.Bytes(w.Key)
		if w.Delete {
			b.Byte(WriteDelete)
			continue
		}
		b.Byte(WriteSet)
		b.Bytes(w.Value)
	}
}

// DecodeWrites reads what EncodeWrites wrote. Keys and values alias the
// body.
func DecodeWrites(r *Reader) []Write {
	n := r.Count(2)
	ws := make([]Write, n)
	for i := range ws {
		ws[i].Key = r.Bytes()
		switch r.Byte() {
		case WriteSet:
			ws[i].Value = r.Bytes()
			if ws[i].Value == nil {
				ws[i].Value = []byte{}
			}
		case WriteDelete:
			ws[i].Delete = true
		default:
			r.fail("unknown write kind")
			return nil
		}
	}
	return ws
}

// DecodeCommit reads the body of OpCommit. Keys and values alias body.
func DecodeCommit(body []byte) (*Commit, error) {
	r := NewReader(body)
	c := &Commit{Snap: r.U64(), Client: r.U64(), Txn: r.U64()}
	c.Reads = make([][]byte, r.Count(1))
	for i := range c.Reads {
		c.Reads[i] = r.Bytes()
	}
	c.Ranges = make([]Range, r.Count(2))
	for i := range c.Ranges {
		c.Ranges[i] = r.Range()
	}
	c.Writes = DecodeWrites(r)
	if r.Len() > 0 {
		c.Session, c.Call = r.U64(), r.U64()
		if c.Session == 0 && r.Err() == nil {
			r.fail("call tag without a session")
		}
	}
	if err := r.Done(); err != nil {
		return nil, err
	}
	return c, nil
}
