package stats

import "fmt"

// Figure computes one figure from two samples, the earlier first; false
// means the mount does not report it.
type Figure func(prev, cur *Sample) (float64, bool)

// Unit is what a figure counts, which says how to show it.
type Unit int

const (
	Count   Unit = iota // a count or a rate of events (powers of 1000)
	Bytes               // bytes, or bytes per second (powers of 1024)
	Millis              // a latency in milliseconds
	Percent             // a percentage
)

// Column is one figure of a group.
type Column struct {
	Name  string
	Value Figure
	Unit  Unit
}

// Group is the columns of one schema letter.
type Group struct {
	Name    string
	Columns []Column
}

// Metric families the columns read.
const (
	famFuseOps      = "sluice_fuse_ops_duration_seconds"
	famFuseErrors   = "sluice_fuse_ops_errors_total"
	famFuseRead     = "sluice_fuse_read_bytes_total"
	famFuseWritten  = "sluice_fuse_written_bytes_total"
	famMetaTx       = "sluice_meta_transaction_duration_seconds"
	famMetaRestarts = "sluice_meta_transaction_restarts_total"
	famObjRequests  = "sluice_object_requests_total"
	famObjErrors    = "sluice_object_request_errors_total"
	famObjBytes     = "sluice_object_bytes_total"
	famObjDuration  = "sluice_object_request_duration_seconds"
	famCacheHits    = "sluice_blockcache_hits_total"
	famCacheMisses  = "sluice_blockcache_misses_total"
	famCacheEvicted = "sluice_blockcache_evictions_total"
	famCacheBytes   = "sluice_blockcache_bytes"
	famBufferUsed   = "sluice_buffer_used_bytes"
	famStagingBlks  = "sluice_staging_blocks"
	famStagingBytes = "sluice_staging_bytes"
	famCPU          = "process_cpu_seconds_total"
	famRSS          = "process_resident_memory_bytes"
)

// Schema returns the column groups of the letters of schema, in their
// order (a letter given twice counts once): u usage, f fuse, m meta,
// c cache, o object, s staging. Verbosity 1 adds columns to most groups.
// Its errors name the flags of `sluice stats` that set both.
func Schema(schema string, verbosity int) ([]Group, error) {
	if verbosity != 0 && verbosity != 1 {
		return nil, fmt.Errorf("stats: --verbosity must be 0 or 1, not %d", verbosity)
	}
	if schema == "" {
		return nil, fmt.Errorf("stats: --schema is empty; use letters of ufmcos")
	}
	v1 := verbosity >= 1
	var groups []Group
	seen := map[rune]bool{}
	for _, l := range schema {
		if seen[l] {
			continue
		}
		seen[l] = true
		g, ok := group(l, v1)
		if !ok {
			return nil, fmt.Errorf("stats: unknown --schema letter %q; use letters of ufmcos", l)
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// group returns the columns of one schema letter, with those of
// verbosity 1 when v1; false for a letter that names no group.
func group(letter rune, v1 bool) (Group, bool) {
	var g Group
	switch letter {
	case 'u':
		g = Group{"usage", []Column{
			{"cpu", scaled(rate(famCPU, FieldValue), 100), Percent},
			{"mem", gauge(famRSS), Bytes},
			{"buf", gauge(famBufferUsed), Bytes},
		}}
		if v1 {
			g.Columns = append(g.Columns, Column{"cache", gauge(famCacheBytes), Bytes})
		}
	case 'f':
		g = Group{"fuse", []Column{
			{"ops", rate(famFuseOps, FieldCount), Count},
			{"lat", avgMillis(famFuseOps), Millis},
			{"read", rate(famFuseRead, FieldValue), Bytes},
			{"write", rate(famFuseWritten, FieldValue), Bytes},
		}}
		if v1 {
			g.Columns = append(g.Columns,
				Column{"rdops", rate(famFuseOps, FieldCount, "method", "read"), Count},
				Column{"wrops", rate(famFuseOps, FieldCount, "method", "write"), Count},
				Column{"err", rate(famFuseErrors, FieldValue), Count},
				Column{"rdlat", avgMillis(famFuseOps, "method", "read"), Millis},
				Column{"wrlat", avgMillis(famFuseOps, "method", "write"), Millis})
		}
	case 'm':
		g = Group{"meta", []Column{
			{"txn", rate(famMetaTx, FieldCount), Count},
			{"lat", avgMillis(famMetaTx), Millis},
			{"rtry", rate(famMetaRestarts, FieldValue), Count},
		}}
		if v1 {
			g.Columns = append(g.Columns,
				Column{"wtxn", rate(famMetaTx, FieldCount, "kind", "write"), Count},
				Column{"wlat", avgMillis(famMetaTx, "kind", "write"), Millis})
		}
	case 'c':
		g = Group{"cache", []Column{
			{"hit", rate(famCacheHits, FieldValue), Count},
			{"miss", cacheMisses, Count},
			{"hit%", cacheHitRatio, Percent},
			{"evict", rate(famCacheEvicted, FieldValue), Count},
		}}
		if v1 {
			g.Columns = append(g.Columns,
				Column{"mem", gauge(famCacheBytes, "tier", "memory"), Bytes},
				Column{"disk", gauge(famCacheBytes, "tier", "disk"), Bytes})
		}
	case 'o':
		g = Group{"object", []Column{
			{"get", rate(famObjRequests, FieldValue, "op", "get"), Count},
			{"put", rate(famObjRequests, FieldValue, "op", "put"), Count},
			{"getB", rate(famObjBytes, FieldValue, "op", "get"), Bytes},
			{"putB", rate(famObjBytes, FieldValue, "op", "put"), Bytes},
			{"err", rate(famObjErrors, FieldValue), Count},
			{"lat", avgMillis(famObjDuration), Millis},
		}}
		if v1 {
			g.Columns = append(g.Columns,
				Column{"head", rate(famObjRequests, FieldValue, "op", "head"), Count},
				Column{"list", rate(famObjRequests, FieldValue, "op", "list"), Count},
				Column{"del", rate(famObjRequests, FieldValue, "op", "delete"), Count})
		}
	case 's':
		g = Group{"staging", []Column{
			{"blks", gauge(famStagingBlks), Count},
			{"bytes", gauge(famStagingBytes), Bytes},
		}}
	default:
		return Group{}, false
	}
	return g, true
}
