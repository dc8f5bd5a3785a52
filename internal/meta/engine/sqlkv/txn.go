package sqlkv

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/sluicefs/sluice/internal/meta/store/kvstore"
)

// getManyBatch bounds the keys of one IN (...) query, well under every
// dialect's limit on placeholders.
const getManyBatch = 500

// txn is a kvstore.Txn over one SQL transaction. Writes execute at once, so
// reads see them.
type txn struct {
	ctx   context.Context
	db    *DB
	tx    *sql.Tx
	write bool
	err   error // first failed statement, classified; voids the transaction
}

var _ kvstore.Txn = (*txn)(nil)

// fail records the first failure of a statement and returns it classified.
func (t *txn) fail(err error) error {
	if t.err == nil {
		t.err = t.db.classify(err)
	}
	return t.err
}

// lock returns the suffix that locks what a SELECT reads.
func (t *txn) lock() string {
	if t.write {
		return t.db.d.LockReads
	}
	return ""
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	q := t.db.q.get
	if t.write {
		q = t.db.q.getLocked
	}
	var v []byte
	err := t.tx.QueryRowContext(t.ctx, q, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, t.fail(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

func (t *txn) GetMany(keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for start := 0; start < len(keys); start += getManyBatch {
		part := keys[start:min(start+getManyBatch, len(keys))]
		found, err := t.getBatch(part)
		if err != nil {
			return nil, err
		}
		for i, k := range part {
			out[start+i] = found[string(k)]
		}
	}
	return out, nil
}

// getBatch fetches the pairs of keys present, in one query.
func (t *txn) getBatch(keys [][]byte) (map[string][]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	var q strings.Builder
	q.WriteString("SELECT k, v FROM " + t.db.table + " WHERE k IN (")
	args := make([]any, len(keys))
	for i, k := range keys {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString(t.db.ph(i + 1))
		args[i] = k
	}
	q.WriteString(")" + t.lock())
	rows, err := t.tx.QueryContext(t.ctx, q.String(), args...)
	if err != nil {
		return nil, t.fail(err)
	}
	defer rows.Close()
	found := make(map[string][]byte, len(keys))
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, t.fail(err)
		}
		if v == nil {
			v = []byte{}
		}
		found[string(k)] = v
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(err)
	}
	return found, nil
}

func (t *txn) Scan(begin, end []byte, limit int) ([]kvstore.Pair, error) {
	if t.err != nil {
		return nil, t.err
	}
	var conds []string
	var args []any
	if len(begin) > 0 {
		args = append(args, begin)
		conds = append(conds, "k >= "+t.db.ph(len(args)))
	}
	if end != nil {
		args = append(args, end)
		conds = append(conds, "k < "+t.db.ph(len(args)))
	}
	q := "SELECT k, v FROM " + t.db.table
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY k"
	if limit > 0 {
		q += " LIMIT " + strconv.Itoa(limit)
	}
	rows, err := t.tx.QueryContext(t.ctx, q+t.lock(), args...)
	if err != nil {
		return nil, t.fail(err)
	}
	defer rows.Close()
	var out []kvstore.Pair
	for rows.Next() {
		var p kvstore.Pair
		if err := rows.Scan(&p.Key, &p.Value); err != nil {
			return nil, t.fail(err)
		}
		if p.Value == nil {
			p.Value = []byte{}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, t.fail(err)
	}
	return out, nil
}

func (t *txn) Set(key, value []byte) {
	if value == nil {
		value = []byte{}
	}
	t.exec(t.db.q.upsert, key, value)
}

func (t *txn) Delete(key []byte) { t.exec(t.db.q.del, key) }

func (t *txn) exec(q string, args ...any) {
	if t.err != nil {
		return
	}
	if _, err := t.tx.ExecContext(t.ctx, q, args...); err != nil {
		t.fail(err)
	}
}
