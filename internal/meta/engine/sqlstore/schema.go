package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// column types, replaced by the dialect's in tableDefs.
const (
	tInt  = "INT"
	tName = "NAME"
	tBlob = "BLOB"
)

// tableDef is one table: its kind (the name after the prefix), columns
// with their types, and the primary key.
type tableDef struct {
	kind string
	cols [][2]string
	key  []string
}

// tables lists the tables in creation order. node comes last: its
// existence tells Open that the tables are there, so a creation that
// stopped half-way is completed by the next one.
var tables = []tableDef{
	{"edge", [][2]string{{"parent", tInt}, {"name", tName}, {"ino", tInt}, {"type", tInt}}, []string{"parent", "name"}},
	{"symlink", [][2]string{{"ino", tInt}, {"target", tBlob}}, []string{"ino"}},
	{"xattr", [][2]string{{"ino", tInt}, {"name", tName}, {"value", tBlob}}, []string{"ino", "name"}},
	{"chunk", [][2]string{{"ino", tInt}, {"idx", tInt}, {"slices", tBlob}}, []string{"ino", "idx"}},
	{"sliceref", [][2]string{{"id", tInt}, {"size", tInt}, {"extra", tInt}}, []string{"id", "size"}},
	{"counter", [][2]string{{"name", tName}, {"value", tInt}}, []string{"name"}},
	{"setting", [][2]string{{"id", tInt}, {"value", tBlob}}, []string{"id"}},
	{"session", [][2]string{{"sid", tInt}, {"heartbeat", tInt}, {"info", tBlob}}, []string{"sid"}},
	{"sustained", [][2]string{{"sid", tInt}, {"ino", tInt}}, []string{"sid", "ino"}},
	{"flock", [][2]string{{"ino", tInt}, {"sid", tInt}, {"owner", tInt}, {"data", tBlob}}, []string{"ino", "sid", "owner"}},
	{"plock", [][2]string{{"ino", tInt}, {"sid", tInt}, {"owner", tInt}, {"data", tBlob}}, []string{"ino", "sid", "owner"}},
	{"lockedinode", [][2]string{{"sid", tInt}, {"ino", tInt}}, []string{"sid", "ino"}},
	{"delfile", [][2]string{{"ino", tInt}, {"length", tInt}, {"expire", tInt}}, []string{"ino", "length"}},
	{"delslice", [][2]string{{"id", tInt}, {"size", tInt}}, []string{"id", "size"}},
	{"truncation", [][2]string{{"ino", tInt}, {"from_idx", tInt}}, []string{"ino"}},
	{"unsynced", [][2]string{{"sid", tInt}, {"id", tInt}, {"size", tInt}, {"ino", tInt}, {"idx", tInt}}, []string{"sid", "id", "size"}},
	{"node", nodeCols(), []string{"ino"}},
}

// addedLater lists the tables that volumes formatted by earlier versions
// lack; Open creates them.
var addedLater = map[string]bool{"unsynced": true}

// nodeFields are the columns of node, in the order nodeArgs and scanNode
// use.
const nodeFields = "ino, type, flags, mode, uid, gid, atime, mtime, ctime, atimensec, mtimensec, ctimensec, nlink, length, rdev, parent"

func nodeCols() [][2]string {
	var cols [][2]string
	for _, f := range strings.Split(nodeFields, ", ") {
		cols = append(cols, [2]string{f, tInt})
	}
	return cols
}

// createTables creates the tables that do not exist.
func (s *Store) createTables(ctx context.Context) error {
	for _, t := range tables {
		if err := s.createTable(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// upgradeTables creates the tables of addedLater that a volume formatted
// by an earlier version lacks. It only reads when they are there, so a
// user who may not create tables can still open an upgraded volume.
func (s *Store) upgradeTables(ctx context.Context) error {
	for _, t := range tables {
		if !addedLater[t.kind] {
			continue
		}
		have, err := s.exists(ctx, s.table(t.kind))
		if err != nil {
			return err
		}
		if !have {
			if err := s.createTable(ctx, t); err != nil {
				return fmt.Errorf("upgrade a volume of an earlier version: %w", err)
			}
		}
	}
	return nil
}

// createTable creates t unless it exists.
func (s *Store) createTable(ctx context.Context, t tableDef) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + s.table(t.kind) + " (")
	for _, c := range t.cols {
		typ := map[string]string{tInt: s.d.Int, tName: s.d.Name, tBlob: s.d.Blob}[c[1]]
		b.WriteString(c[0] + " " + typ + " NOT NULL, ")
	}
	b.WriteString("PRIMARY KEY (" + strings.Join(t.key, ", ") + "))" + s.d.TableOptions)
	if _, err := s.writer.ExecContext(ctx, b.String()); err != nil {
		return fmt.Errorf("create table %s: %w", s.table(t.kind), s.d.Describe(err))
	}
	return nil
}

// Drop deletes every table of the volume, for tests and for destroying a
// volume; s stays open but can no longer be used.
func (s *Store) Drop(ctx context.Context) error {
	for _, kind := range kinds() {
		if _, err := s.writer.ExecContext(ctx, "DROP TABLE IF EXISTS "+s.table(kind)); err != nil {
			return fmt.Errorf("drop table %s: %w", s.table(kind), s.d.Describe(err))
		}
	}
	return nil
}

func kinds() []string {
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = t.kind
	}
	return out
}

var _ store.Analyzer = (*Store)(nil)

// Analyze refreshes the planner's statistics of the tables a bulk write
// fills, so that the queries after a load use the primary keys: a
// planner that still believes a table empty scans it whole (PostgreSQL
// until its autovacuum comes by).
func (s *Store) Analyze(ctx context.Context) error {
	if s.d.Analyze == "" {
		return nil
	}
	for _, t := range []string{"node", "edge", "chunk", "symlink", "xattr", "sliceref"} {
		q := fmt.Sprintf(s.d.Analyze, s.table(t))
		if _, err := s.writer.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("analyze %s: %w", s.table(t), s.d.Describe(err))
		}
	}
	return nil
}
