package meta

// Version identifies one state of a file's contents as any mount can tell
// it from the file's attributes: every change of the data (a committed
// slice, a truncation, a hole punched, a range copied in) stamps the
// change time with the nanosecond, and most change the length or the
// modification time too. Two equal versions of one inode therefore mean
// that its data did not change in between, which lets a mount keep what
// it cached of the file without reading the slice lists again.
//
// A change of attributes only (chmod, chown, utimes) stamps the change
// time as well, so it also counts as a new version: a mount then reads
// the file again though its data is the same, which costs time, never
// correctness.
type Version struct {
	Length    uint64
	Mtime     int64
	Ctime     int64
	Mtimensec uint32
	Ctimensec uint32
}

// VersionOf returns the version of the file whose attributes are a.
func VersionOf(a *Attr) Version {
	return Version{Length: a.Length, Mtime: a.Mtime, Ctime: a.Ctime, Mtimensec: a.Mtimensec, Ctimensec: a.Ctimensec}
}
