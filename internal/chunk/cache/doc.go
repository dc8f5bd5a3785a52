// Package cache keeps blocks close to the client so that repeated and
// sequential reads do not go back to object storage, and stages blocks
// written with --writeback until they are uploaded.
//
// Three caches satisfy the small Cache interface: Memory, an LRU bounded in
// bytes; Disk, files under one or more local directories; and Tiered, which
// puts a fast cache in front of a slow one. Cached byte slices are shared
// and must not be modified by callers. A cache never fails an operation of
// the file system: every error degrades to a miss or to not caching.
//
// # Disk layout
//
// Each cache directory holds, per volume, <dir>/<volume UUID>/raw/<key>
// for cached blocks and <dir>/<volume UUID>/rawstaging/<key> for staged
// blocks, keys being object keys such as chunks/0/1/1234_0_4194304. A key
// always maps to the same directory (by hash), so a staged block moves into
// the cache by a rename on one file system.
//
// Every file ends with a trailer: a CRC32C per 4 KiB page of data, the
// data length, and a CRC32C of those two and the key. Reads check the
// pages they return; a file that is short, corrupt or not in this format
// is removed and reported as a miss, never returned. Files are written to
// a temporary name and renamed, so a reader never sees a partial file;
// staged files are also fsync'd, with their directory, before Stage
// returns.
//
// Range reads (Disk.ReadAt) keep up to DiskConfig.OpenFiles cached files
// open, with their checked page sums, so that a hit costs one pread and
// the checksums of the pages read. An open file is closed, once the reads
// using it end, when its block leaves the cache (Remove, eviction, a
// failed check), when more files are open than allowed, and on Close.
// Blocks are immutable, so a read that started before a removal may finish
// from the unlinked file; every page it returns is checked.
//
// # Eviction and space
//
// Each directory keeps an index of its cached files in least-recently-used
// order, rebuilt by a background scan after a restart (reads work during
// the scan: an unindexed key is looked up on disk). A new block is written
// only when the directory's share of the capacity and the free-space floor
// (a ratio of its file system's size) allow it after evicting the least
// recently used blocks; that decision (plan) and the index (lru) do no IO.
package cache
