package backup

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Prefix is where backups are kept, relative to the volume's objects.
const Prefix = "meta/"

// nameLayout is the time in a backup's name, in UTC.
const nameLayout = "2006-01-02-150405"

// Name returns the key of the backup started at t:
// meta/dump-YYYY-MM-DD-HHMMSS.json.gz, in UTC, as JuiceFS names its own.
func Name(t time.Time) string {
	return Prefix + "dump-" + t.UTC().Format(nameLayout) + ".json.gz"
}

// ParseName returns the time a backup key (or its base name) names, and
// whether it names one.
func ParseName(key string) (time.Time, bool) {
	base := strings.TrimPrefix(key, Prefix)
	if !strings.HasPrefix(base, "dump-") || !strings.HasSuffix(base, ".json.gz") {
		return time.Time{}, false
	}
	t, err := time.Parse(nameLayout, strings.TrimSuffix(strings.TrimPrefix(base, "dump-"), ".json.gz"))
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// The tiers of the rotation, by a backup's age at the time of the
// rotation.
const (
	// KeepAll is the age below which every backup is kept.
	KeepAll = 2 * 24 * time.Hour
	// KeepDaily is the age below which one backup per UTC day is kept.
	KeepDaily = 14 * 24 * time.Hour
	// KeepWeekly is the age below which one backup per ISO week is kept;
	// older ones are kept one per calendar month (UTC).
	KeepWeekly = 60 * 24 * time.Hour
)

// Rotate returns the backups of keys to delete at now, in ascending
// order, so that recent backups stay dense and old ones sparse:
//
//   - a backup younger than KeepAll (2 days) is kept;
//   - one younger than KeepDaily (2 weeks) is kept when it is the oldest
//     of its UTC day among those of that tier;
//   - one younger than KeepWeekly (60 days), when it is the oldest of its
//     ISO week among those of that tier;
//   - an older one, when it is the oldest of its calendar month.
//
// Keeping the oldest of each period makes the rotation stable: as
// backups age into coarser tiers, what was kept is thinned, never
// replaced by what was deleted, and running Rotate again at the same time
// deletes nothing more. Keys that do not name a backup (see ParseName),
// and backups dated after now, are never deleted.
func Rotate(keys []string, now time.Time) []string {
	type backup struct {
		key string
		t   time.Time
	}
	var all []backup
	for _, k := range keys {
		if t, ok := ParseName(k); ok {
			all = append(all, backup{k, t})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].t.Before(all[j].t) })
	seen := map[string]bool{} // periods that already have their oldest
	var del []string
	for _, b := range all {
		period := ""
		switch age := now.Sub(b.t); {
		case age < KeepAll:
			continue
		case age < KeepDaily:
			period = "day " + b.t.Format("2006-01-02")
		case age < KeepWeekly:
			y, w := b.t.ISOWeek()
			period = fmt.Sprintf("week %d-%02d", y, w)
		default:
			period = "month " + b.t.Format("2006-01")
		}
		if seen[period] {
			del = append(del, b.key)
		}
		seen[period] = true
	}
	sort.Strings(del)
	return del
}
