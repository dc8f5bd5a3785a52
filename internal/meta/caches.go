package meta

// Caches is what a session remembers of the volume between operations
// that a client of the metadata server keeps in step with the calls it
// sends (internal/meta/remote): there the session's changes are made by
// the server, not by this session's transactions, so that the session
// must be told of them. Two memories are concerned:
//
//   - the attributes of directories whose entries the session just
//     changed (Config.DirAttrReuse), which answer the kernel's next
//     getattr of them without a round trip: DirsBegin before a call,
//     RecordDirs with what the server sent back after it, Dir to answer,
//     ForgetDirs when a change may leave them wrong;
//   - the statahead's listings of directories being walked
//     (Config.Statahead): ChangeBegins before a change, and ForgetNode
//     and ForgetEntry for what it writes, before the change and again
//     after it, before calling the function ChangeBegins returned.
//
// The server's side of a session (Attach) uses Dir to send back the
// attributes of the directories a call changed.
type Caches interface {
	DirsBegin() uint64
	RecordDirs(gen uint64, dirs ...*Attr)
	Dir(ino Ino) (*Attr, bool)
	ForgetDirs(inos ...Ino)
	ChangeBegins() (end func())
	ForgetNode(ino Ino, listing bool)
	ForgetEntry(parent Ino, name []byte)
}

// Caches returns the session's caches, for a client that runs the
// session's operations elsewhere.
func (s *Session) Caches() Caches { return caches{s.Client} }

// caches is a Client's Caches.
type caches struct{ c *Client }
