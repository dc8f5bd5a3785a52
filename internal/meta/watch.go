package meta

import (
	"context"

	"github.com/sluicefs/sluice/internal/meta/store"
)

// writeWatcher is a cache of what the engine held (statahead's listings,
// the open cache) that the client's own write transactions keep true:
// each write of a node or an entry is told to it before the transaction
// commits, and so are the begin and end of every transaction that
// writes, so that it keeps nothing read while one was under way.
type writeWatcher interface {
	writeBegan()
	writeEnded()
	node(n *store.Node)
	deleted(ino Ino)
	entry(parent Ino, name []byte)
}

// watchers tells each of its members.
type watchers []writeWatcher

func (ws watchers) writeBegan() {
	for _, w := range ws {
		w.writeBegan()
	}
}

func (ws watchers) writeEnded() {
	for _, w := range ws {
		w.writeEnded()
	}
}

func (ws watchers) node(n *store.Node) {
	for _, w := range ws {
		w.node(n)
	}
}

func (ws watchers) deleted(ino Ino) {
	for _, w := range ws {
		w.deleted(ino)
	}
}

func (ws watchers) entry(parent Ino, name []byte) {
	for _, w := range ws {
		w.entry(parent, name)
	}
}

// watchedStore is the client's store when a writeWatcher is on: its
// write transactions tell the watcher what they write.
type watchedStore struct {
	store.Store
	w writeWatcher
}

func (s watchedStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	var began bool
	defer func() {
		if began {
			s.w.writeEnded()
		}
	}()
	return s.Store.Update(ctx, func(tx store.Tx) error {
		return fn(&watchedTx{Tx: tx, w: s.w, began: &began})
	})
}

// watchedTx passes every write of a node or entry on to the watcher
// before buffering it.
type watchedTx struct {
	store.Tx
	w     writeWatcher
	began *bool
}

func (t *watchedTx) writing() {
	if !*t.began {
		*t.began = true
		t.w.writeBegan()
	}
}

func (t *watchedTx) SetNode(n *store.Node) {
	t.writing()
	t.w.node(n)
	t.Tx.SetNode(n)
}

func (t *watchedTx) DeleteNode(ino Ino) {
	t.writing()
	t.w.deleted(ino)
	t.Tx.DeleteNode(ino)
}

func (t *watchedTx) SetEdge(parent Ino, e store.Edge) {
	t.writing()
	t.w.entry(parent, e.Name)
	t.Tx.SetEdge(parent, e)
}

func (t *watchedTx) DeleteEdge(parent Ino, name []byte) {
	t.writing()
	t.w.entry(parent, name)
	t.Tx.DeleteEdge(parent, name)
}
