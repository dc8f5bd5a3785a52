package wire

import "github.com/sluicefs/sluice/internal/meta"

// Tuples carry an operation's arguments, or its results, as one value, so
// that one generic Op describes every operation. A and B, then C, D and E,
// are in the order of the meta.Ops method's parameters (or results).
type (
	// T2 is two values.
	T2[P, Q any] struct {
		A P
		B Q
	}
	// T3 is three values.
	T3[P, Q, R any] struct {
		A P
		B Q
		C R
	}
	// T4 is four values.
	T4[P, Q, R, S any] struct {
		A P
		B Q
		C R
		D S
	}
	// T5 is five values.
	T5[P, Q, R, S, U any] struct {
		A P
		B Q
		C R
		D S
		E U
	}
	// None is no value: the arguments of an operation that has none, or
	// the results of one that returns only an error.
	None struct{}
)

func tuple2[P, Q any](p Codec[P], q Codec[Q]) Codec[T2[P, Q]] {
	return Codec[T2[P, Q]]{
		Put: func(b *Buf, t T2[P, Q]) { p.Put(b, t.A); q.Put(b, t.B) },
		Get: func(r *Reader) T2[P, Q] { return T2[P, Q]{p.Get(r), q.Get(r)} },
	}
}

func tuple3[P, Q, R any](p Codec[P], q Codec[Q], s Codec[R]) Codec[T3[P, Q, R]] {
	return Codec[T3[P, Q, R]]{
		Put: func(b *Buf, t T3[P, Q, R]) { p.Put(b, t.A); q.Put(b, t.B); s.Put(b, t.C) },
		Get: func(r *Reader) T3[P, Q, R] { return T3[P, Q, R]{p.Get(r), q.Get(r), s.Get(r)} },
	}
}

func tuple4[P, Q, R, S any](p Codec[P], q Codec[Q], s Codec[R], u Codec[S]) Codec[T4[P, Q, R, S]] {
	return Codec[T4[P, Q, R, S]]{
		Put: func(b *Buf, t T4[P, Q, R, S]) { p.Put(b, t.A); q.Put(b, t.B); s.Put(b, t.C); u.Put(b, t.D) },
		Get: func(r *Reader) T4[P, Q, R, S] { return T4[P, Q, R, S]{p.Get(r), q.Get(r), s.Get(r), u.Get(r)} },
	}
}

func tuple5[P, Q, R, S, U any](p Codec[P], q Codec[Q], s Codec[R], u Codec[S], v Codec[U]) Codec[T5[P, Q, R, S, U]] {
	return Codec[T5[P, Q, R, S, U]]{
		Put: func(b *Buf, t T5[P, Q, R, S, U]) {
			p.Put(b, t.A)
			q.Put(b, t.B)
			s.Put(b, t.C)
			u.Put(b, t.D)
			v.Put(b, t.E)
		},
		Get: func(r *Reader) T5[P, Q, R, S, U] {
			return T5[P, Q, R, S, U]{p.Get(r), q.Get(r), s.Get(r), u.Get(r), v.Get(r)}
		},
	}
}

// The codecs of single values.
var (
	none    = Codec[None]{Put: func(*Buf, None) {}, Get: func(*Reader) None { return None{} }}
	ino     = Codec[meta.Ino]{Put: func(b *Buf, v meta.Ino) { b.Uvarint(uint64(v)) }, Get: func(r *Reader) meta.Ino { return meta.Ino(r.Uvarint()) }}
	u32     = Codec[uint32]{Put: func(b *Buf, v uint32) { b.Uvarint(uint64(v)) }, Get: func(r *Reader) uint32 { return uint32(r.Uvarint()) }}
	u64     = Codec[uint64]{Put: func(b *Buf, v uint64) { b.Uvarint(v) }, Get: func(r *Reader) uint64 { return r.Uvarint() }}
	integer = Codec[int]{Put: func(b *Buf, v int) { b.Varint(int64(v)) }, Get: func(r *Reader) int { return int(r.Varint()) }}
	boolean = Codec[bool]{Put: putBool, Get: getBool}
	byteStr = Codec[[]byte]{Put: func(b *Buf, v []byte) { b.Bytes(v) }, Get: func(r *Reader) []byte { return r.Bytes() }}
	str     = Codec[string]{Put: func(b *Buf, v string) { b.Bytes([]byte(v)) }, Get: func(r *Reader) string { return string(r.Bytes()) }}
	// optBytes tells nil (from the start of a listing) from empty.
	optBytes = Codec[[]byte]{
		Put: func(b *Buf, v []byte) { putBool(b, v != nil); b.Bytes(v) },
		Get: func(r *Reader) []byte {
			if !getBool(r) {
				r.Bytes()
				return nil
			}
			v := r.Bytes()
			if v == nil {
				v = []byte{}
			}
			return v
		},
	}
	strs = Codec[[]string]{
		Put: func(b *Buf, v []string) {
			b.Uvarint(uint64(len(v)))
			for _, s := range v {
				b.Bytes([]byte(s))
			}
		},
		Get: func(r *Reader) []string {
			n := r.Count(1)
			var v []string
			for i := 0; i < n; i++ {
				v = append(v, string(r.Bytes()))
			}
			return v
		},
	}
	attr      = Codec[*meta.Attr]{Put: putAttr, Get: getAttr}
	attrValue = Codec[*meta.Attr]{Put: putAttr, Get: getAttrValue}
	newNode   = Codec[meta.NewNode]{Put: putNewNode, Get: getNewNode}
	changes   = Codec[[]meta.AttrChange]{Put: putChanges, Get: getChanges}
	slice     = Codec[meta.Slice]{Put: putSlice, Get: getSlice}
	sliceList = Codec[[]meta.Slice]{
		Put: func(b *Buf, ss []meta.Slice) {
			b.Uvarint(uint64(len(ss)))
			for _, s := range ss {
				putSlice(b, s)
			}
		},
		Get: func(r *Reader) []meta.Slice {
			n := r.Count(5)
			if n == 0 {
				return nil
			}
			ss := make([]meta.Slice, n)
			for i := range ss {
				ss[i] = getSlice(r)
			}
			return ss
		},
	}
	lock    = Codec[meta.PosixLock]{Put: putLock, Get: getLock}
	version = Codec[meta.Version]{
		Put: func(b *Buf, v meta.Version) {
			b.Uvarint(v.Length)
			b.Varint(v.Mtime)
			b.Varint(v.Ctime)
			b.Uvarint(uint64(v.Mtimensec))
			b.Uvarint(uint64(v.Ctimensec))
		},
		Get: func(r *Reader) meta.Version {
			return meta.Version{Length: r.Uvarint(), Mtime: r.Varint(), Ctime: r.Varint(),
				Mtimensec: uint32(r.Uvarint()), Ctimensec: uint32(r.Uvarint())}
		},
	}
	statFS = Codec[meta.StatFS]{
		Put: func(b *Buf, st meta.StatFS) {
			b.Uvarint(st.TotalSpace)
			b.Uvarint(st.AvailSpace)
			b.Uvarint(st.UsedInodes)
			b.Uvarint(st.AvailInodes)
		},
		Get: func(r *Reader) meta.StatFS {
			return meta.StatFS{TotalSpace: r.Uvarint(), AvailSpace: r.Uvarint(), UsedInodes: r.Uvarint(), AvailInodes: r.Uvarint()}
		},
	}
	// entries carries a listing; an entry's attributes travel when the
	// listing has them (readdirplus).
	entries = Codec[[]meta.Entry]{
		Put: func(b *Buf, es []meta.Entry) {
			b.Uvarint(uint64(len(es)))
			for i := range es {
				b.Bytes(es[i].Name)
				b.Uvarint(uint64(es[i].Ino))
				b.Byte(es[i].Type)
				putAttr(b, es[i].Attr)
			}
		},
		Get: func(r *Reader) []meta.Entry {
			n := r.Count(4)
			es := make([]meta.Entry, n)
			for i := range es {
				es[i] = meta.Entry{Name: r.Bytes(), Ino: meta.Ino(r.Uvarint()), Type: r.Byte()}
				es[i].Attr = getAttr(r)
			}
			return es
		},
	}
)
