package wire

import (
	"bufio"
	"bytes"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	c := &Commit{Snap: 3, Client: 4, Txn: 5,
		Reads:  [][]byte{[]byte("a"), {}},
		Ranges: []Range{{Begin: []byte("b"), End: []byte("c")}, {Begin: []byte("d")}, {Begin: []byte{}, End: []byte{}}},
		Writes: []Write{{Key: []byte("x"), Value: []byte("1")}, {Key: []byte("y"), Delete: true}, {Key: []byte("z"), Value: []byte{}}}}
	b := NewFrame(42, OpCommit)
	c.Encode(b)
	f, err := ReadFrame(bufio.NewReader(bytes.NewReader(b.Finish())))
	if err != nil || f.ID != 42 || f.Kind != OpCommit {
		t.Fatalf("frame %+v, %v", f, err)
	}
	got, err := DecodeCommit(f.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got.Snap != 3 || got.Client != 4 || got.Txn != 5 || len(got.Reads) != 2 || len(got.Ranges) != 3 || len(got.Writes) != 3 {
		t.Fatalf("decoded %+v", got)
	}
	if got.Ranges[1].End != nil || got.Ranges[2].End == nil {
		t.Fatalf("unbounded and empty ends: %+v", got.Ranges)
	}
	if !got.Writes[1].Delete || got.Writes[2].Value == nil || got.Writes[2].Delete {
		t.Fatalf("writes %+v", got.Writes)
	}
	if got.Session != 0 || got.Call != 0 {
		t.Fatalf("an untagged commit decodes with call %d of session %d", got.Call, got.Session)
	}
}

// TestCommitCallTag checks the call tag after a commit's writes: it
// decodes when present, and a tag naming no session is refused.
func TestCommitCallTag(t *testing.T) {
	c := &Commit{Client: 4, Txn: 5, Writes: []Write{{Key: []byte("x"), Value: []byte("1")}}, Session: 7, Call: 9}
	b := NewFrame(1, OpCommit)
	c.Encode(b)
	body := b.Finish()[13:]
	got, err := DecodeCommit(body)
	if err != nil || got.Session != 7 || got.Call != 9 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	bad := append([]byte(nil), body...)
	for i := len(bad) - 16; i < len(bad)-8; i++ {
		bad[i] = 0 // session 0
	}
	if _, err := DecodeCommit(bad); !errors.Is(err, ErrFrame) {
		t.Fatalf("a call tag without a session: %v", err)
	}
	if _, err := DecodeCommit(body[:len(body)-3]); !errors.Is(err, ErrFrame) {
		t.Fatalf("a cut call tag: %v", err)
	}
}

func TestBadFrames(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"too short", []byte{0, 0, 0, 3, 1, 2, 3}},
		{"too long", []byte{0x7f, 0xff, 0xff, 0xff}},
		{"truncated", []byte{0, 0, 0, 20, 1, 2, 3}},
	}
	for _, tt := range tests {
		_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tt.in)))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
	if _, err := DecodeCommit([]byte{1, 2, 3}); !errors.Is(err, ErrFrame) {
		t.Errorf("short commit: %v", err)
	}
	// A count larger than the body can hold is refused before allocating.
	b := NewBuf(0)
	b.U64(0)
	b.U64(0)
	b.U64(0)
	b.Uvarint(1 << 40)
	if _, err := DecodeCommit(b.Raw()); !errors.Is(err, ErrFrame) {
		t.Errorf("huge count: %v", err)
	}
}

// FuzzDecodeCommit feeds the commit decoder arbitrary bodies: it must
// return a commit or an error, never panic.
func FuzzDecodeCommit(f *testing.F) {
	b := NewFrame(1, OpCommit)
	(&Commit{Client: 1, Txn: 2, Reads: [][]byte{[]byte("k")}, Ranges: []Range{{Begin: []byte("a")}}, Writes: []Write{{Key: []byte("k"), Value: []byte("v")}}}).Encode(b)
	f.Add(b.Finish()[13:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := DecodeCommit(body)
		if err != nil {
			return
		}
		again := NewBuf(0)
		c.Encode(again)
		if _, err := DecodeCommit(again.Raw()); err != nil {
			t.Fatalf("re-encoded commit does not decode: %v", err)
		}
	})
}

// FuzzReadFrame feeds the frame reader arbitrary streams.
func FuzzReadFrame(f *testing.F) {
	f.Add(NewFrame(1, OpGet).Finish())
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReader(bytes.NewReader(in))
		for i := 0; i < 100; i++ {
			if _, err := ReadFrame(r); err != nil {
				return
			}
		}
	})
}

func TestLargeFrame(t *testing.T) {
	b := NewFrame(9, OpCommit)
	big := bytes.Repeat([]byte("v"), 3<<20)
	(&Commit{Client: 1, Txn: 1, Writes: []Write{{Key: []byte("k"), Value: big}}}).Encode(b)
	frame := b.Finish()
	f, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeCommit(f.Body)
	if err != nil || !bytes.Equal(c.Writes[0].Value, big) {
		t.Fatalf("3 MiB commit: %v", err)
	}
	// Announced but not sent: an error, not a wait or a large allocation.
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame[:len(frame)/2]))); err == nil {
		t.Fatal("half a large frame read without error")
	}
}
