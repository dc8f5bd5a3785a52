package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicefs/sluice/internal/meta"
	"github.com/sluicefs/sluice/internal/meta/store"
	"github.com/sluicefs/sluice/internal/volume"
)

func newStatus() *cobra.Command {
	metaTimeout := meta.DefaultOpTimeout
	var more bool
	cmd := &cobra.Command{
		Use:   "status META-URL",
		Short: "Show a volume's settings and active mounts",
		Long: `Print the settings of the volume in META-URL (secrets shown as "removed") and
the sessions of the mounts using it: host, mount point, version, process id,
last heartbeat, and what the metadata engine records of each: the files it
has open (OpenFiles, as of its last heartbeat: a mount publishes them with
each heartbeat rather than write at every open and close), the files it
sustains (SustainedCount: files whose last name went while the mount held
them open, deleted at its last close) and the locks it holds (LockCount:
each flock, and each range of POSIX locks).

With --more, also list up to 100 open files, 100 sustained files and 100
locks of each session ("Open": inode, path; "Sustained": inode, length, path; "Locks": inode, kind flock or
posix, type read or write, owner, and for posix the byte range and the
process id; paths are found by walking up parent pointers, empty for a
file with no name or names in several directories), and scan the whole
volume's metadata (which takes a while on a big one) to add:

  "Space": the distinct stored slices the chunk lists name and their bytes
  (ReferencedBytes), the bytes those lists read from them (VisibleBytes;
  DetachedBytes of it belong to deleted files and replaced slice lists not
  yet dropped), the difference (AmplificationBytes: overwritten or cut-off
  bytes still stored, negative when files share slices) and
  ReferencedBytes/VisibleBytes (AmplificationRatio), and the deletion
  backlog (Backlog, the same figures as in "Deletion" below).

  "Server": for a volume on the in-memory metadata server (sluice://), the
  server's figures: records and inodes held (Keys, Inodes), log index,
  newest checkpoint and its size, open snapshots, its Go heap (also per
  inode) and memory from the system, and the pages that hold the records
  and their memory (Pages, PageBytes), of which the idle ones compressed
  (PagesCompressed, PageCompressedBytes).

  "Trash": the files in the trash (.trash) and the bytes of their lengths,
  and its hour directories (Dirs).

  "Deletion": what is still to be deleted: slices queued for their blocks
  to be deleted (Slices, SliceBytes), deleted files whose chunks are still
  to be dropped (Files, FileBytes; WaitingFiles of them not yet due), and
  the deletions that wait for something else: files with no name kept
  until every live mount has said whether it holds them open (Orphans),
  files with no name a mount holds open (SustainedFiles), and truncations
  whose chunks past the new end are still to be dropped (Truncations).`,
		Example: `  sluice status sqlite3://vol.db
  sluice status sqlite3://vol.db --more`,
		Args: exactArgs(1, "META-URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			v, err := openVolume(ctx, args[0], volume.Metadata, metaTimeout)
			if err != nil {
				return err
			}
			defer v.Close(context.WithoutCancel(ctx))
			sessions, err := meta.Sessions(ctx, v.Store())
			if err != nil {
				return fmt.Errorf("list sessions: %w", err)
			}
			out := struct {
				Setting  *meta.Format
				Sessions []sessionStatus
				Space    *spaceStatus    `json:",omitempty"`
				Trash    *trashStatus    `json:",omitempty"`
				Deletion *deletionStatus `json:",omitempty"`
				Server   json.RawMessage `json:",omitempty"`
			}{Setting: v.Format().Redacted(), Sessions: []sessionStatus{}}
			if out.Server, err = store.Report(ctx, v.Store()); err != nil {
				return fmt.Errorf("metadata server figures: %w", err)
			}
			opts := meta.DetailOptions{}
			if more {
				opts = meta.DetailOptions{Limit: statusListLimit, Paths: true}
			}
			for _, s := range sessions {
				d, err := meta.SessionDetails(ctx, v.Store(), s.Sid, opts)
				if err != nil {
					return err
				}
				var paths map[meta.Ino]string
				if more {
					if paths, err = meta.Paths(ctx, v.Store(), s.Open); err != nil {
						return err
					}
				} else {
					s.Open = nil
				}
				out.Sessions = append(out.Sessions, newSessionStatus(s, d, paths))
			}
			setShares(out.Sessions, sessions, time.Now(), volume.MemberLiveFor(0))
			if more {
				prog := newProgress()
				r, err := meta.SpaceUsage(ctx, v.Store(), meta.SpaceOptions{
					Progress: func(n int64) { prog.show("scanned %d metadata records", n) },
				})
				prog.done()
				if err != nil {
					return fmt.Errorf("scan volume: %w", err)
				}
				out.Space = newSpaceStatus(r)
				trash, err := meta.TrashUsage(ctx, v.Store())
				if err != nil {
					return err
				}
				out.Trash = &trashStatus{Files: trash.Files, Bytes: trash.Bytes, Dirs: trash.Dirs}
				pending, err := meta.PendingDeletions(ctx, v.Store())
				if err != nil {
					return err
				}
				out.Deletion = newDeletionStatus(r.Backlog, pending)
			}
			b, err := json.MarshalIndent(out, "", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return nil
		},
	}
	cmd.Flags().BoolVar(&more, "more", false, "also list each session's sustained files and locks with their paths, and scan the volume for its space, trash and deletion figures")
	cmd.Flags().Var(secondsValue{&metaTimeout}, "meta-timeout", metaTimeoutUsage)
	return cmd
}

// statusListLimit bounds the sustained files and the locks `status
// --more` lists per session.
const statusListLimit = 100

// sessionStatus is one element of the "Sessions" array of `status`.
type sessionStatus struct {
	Sid        uint64
	Host       string
	MountPoint string
	Version    string
	PID        int
	Started    string
	Heartbeat  string
	// OpenFiles, SustainedCount and LockCount are always there; Open,
	// Sustained and Locks list some of them with --more.
	OpenFiles      int
	SustainedCount int
	LockCount      int
	// CacheGroup is the mount as a member of a cache group, and
	// Figures what it published at its last heartbeat.
	CacheGroup *cacheGroupMember `json:",omitempty"`
	Figures    map[string]uint64 `json:",omitempty"`
	Open       []openFile        `json:",omitempty"`
	Sustained  []sustainedFile   `json:",omitempty"`
	Locks      []lockStatus      `json:",omitempty"`
}

// cacheGroupMember is a session's "CacheGroup": the mount as a member of
// a cache group. Share is its part of the group's blocks among the live
// sessions of the group (setShares).
type cacheGroupMember struct {
	Name   string
	ID     string
	Addr   string
	Weight int
	Share  float64
}

// setShares fills in the Share of every member of a cache group among
// out, the statuses of sessions in their order, counting the members
// whose heartbeat is at most live old.
func setShares(out []sessionStatus, sessions []meta.SessionStatus, now time.Time, live time.Duration) {
	total := map[string]int{}
	for i, s := range sessions {
		if g := out[i].CacheGroup; g != nil && meta.SessionLive(s.Heartbeat, now, live) {
			total[g.Name] += g.Weight
		}
	}
	for i, s := range sessions {
		if g := out[i].CacheGroup; g != nil && meta.SessionLive(s.Heartbeat, now, live) && total[g.Name] > 0 {
			g.Share = float64(g.Weight) / float64(total[g.Name])
		}
	}
}

// openFile is one element of a session's "Open" array.
type openFile struct {
	Inode meta.Ino
	Path  string
}

// sustainedFile is one element of a session's "Sustained" array.
type sustainedFile struct {
	Inode  meta.Ino
	Length uint64
	Path   string
}

// lockStatus is one element of a session's "Locks" array; Range is
// there for POSIX locks only.
type lockStatus struct {
	Inode meta.Ino
	Kind  string // "flock" or "posix"
	Type  string // "read" or "write"
	Owner uint64
	Range *lockRange `json:",omitempty"`
	Path  string
}

// lockRange is the byte range of a POSIX lock: Start to End inclusive,
// End 9223372036854775807 (meta.LockEnd) up to the end of the file; Pid
// is the process that took it.
type lockRange struct {
	Start, End uint64
	Pid        uint32
}

// newSessionStatus builds the status of session s from its details d;
// paths names its open files, with --more.
func newSessionStatus(s meta.SessionStatus, d *meta.SessionDetail, paths map[meta.Ino]string) sessionStatus {
	out := sessionStatus{Sid: s.Sid, Host: s.Host, MountPoint: s.MountPoint,
		Version: s.Version, PID: s.PID, Started: time.Unix(s.Started, 0).UTC().Format(time.RFC3339),
		Heartbeat: s.Heartbeat.UTC().Format(time.RFC3339), OpenFiles: s.OpenFiles, SustainedCount: d.SustainedCount, LockCount: d.LockCount}
	for _, ino := range s.Open {
		out.Open = append(out.Open, openFile{Inode: ino, Path: paths[ino]})
	}
	out.Figures = s.Figures
	if s.CacheGroup != "" {
		out.CacheGroup = &cacheGroupMember{Name: s.CacheGroup, ID: s.CacheID, Addr: s.CacheAddr, Weight: s.CacheWeight}
	}
	for _, f := range d.Sustained {
		out.Sustained = append(out.Sustained, sustainedFile{Inode: f.Ino, Length: f.Length, Path: f.Path})
	}
	for _, l := range d.Locks {
		ls := lockStatus{Inode: l.Ino, Kind: l.Kind, Type: l.Type, Owner: l.Owner, Path: l.Path}
		if l.Kind == meta.LockKindPosix {
			ls.Range = &lockRange{Start: l.Start, End: l.End, Pid: l.Pid}
		}
		out.Locks = append(out.Locks, ls)
	}
	return out
}

// trashStatus is the "Trash" object of `status --more` (see
// meta.TrashReport).
type trashStatus struct {
	Files, Bytes int64
	Dirs         int64
}

// deletionStatus is the "Deletion" object of `status --more`: the
// deletion queues (as in spaceStatus.Backlog) and the deletions waiting
// for something else (see meta.PendingReport).
type deletionStatus struct {
	Slices, SliceBytes             int64
	Files, FileBytes               int64
	WaitingFiles, WaitingFileBytes int64 // files not yet due
	Orphans, OrphanBytes           int64
	SustainedFiles, SustainedBytes int64
	Truncations                    int64
}

func newDeletionStatus(b meta.DeletionBacklog, p *meta.PendingReport) *deletionStatus {
	return &deletionStatus{Slices: b.Slices, SliceBytes: b.SliceBytes, Files: b.Files, FileBytes: b.FileBytes,
		WaitingFiles: b.Waiting, WaitingFileBytes: b.WaitingBytes,
		Orphans: p.Orphans, OrphanBytes: p.OrphanBytes, SustainedFiles: p.Sustained, SustainedBytes: p.SustainedBytes,
		Truncations: p.Truncations}
}

// spaceStatus is the "Space" object of `status --more` (see
// meta.SpaceReport).
type spaceStatus struct {
	Files, Chunks, SliceEntries, Slices int64
	ReferencedBytes                     int64
	VisibleBytes                        int64
	DetachedBytes                       int64
	AmplificationBytes                  int64
	AmplificationRatio                  float64 // 0 when nothing is visible
	Backlog                             spaceBacklog
}

// spaceBacklog is the deletion backlog in spaceStatus.
type spaceBacklog struct {
	Slices, SliceBytes             int64
	Files, FileBytes               int64
	WaitingFiles, WaitingFileBytes int64 // files not yet expired
}

func newSpaceStatus(r *meta.SpaceReport) *spaceStatus {
	s := &spaceStatus{Files: r.Files, Chunks: r.Chunks, SliceEntries: r.SliceEntries, Slices: r.Slices,
		ReferencedBytes: r.Referenced, VisibleBytes: r.Visible, DetachedBytes: r.Detached,
		AmplificationBytes: r.Amplification(), AmplificationRatio: math.Round(r.Ratio()*1e4) / 1e4}
	b := r.Backlog
	s.Backlog = spaceBacklog{Slices: b.Slices, SliceBytes: b.SliceBytes, Files: b.Files, FileBytes: b.FileBytes,
		WaitingFiles: b.Waiting, WaitingFileBytes: b.WaitingBytes}
	return s
}
