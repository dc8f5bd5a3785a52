package backup

import (
	"slices"
	"testing"
	"time"
)

func TestName(t *testing.T) {
	at := time.Date(2024, 3, 5, 7, 8, 9, 999, time.FixedZone("X", 3600))
	key := Name(at)
	if key != "meta/dump-2024-03-05-060809.json.gz" {
		t.Fatalf("Name = %q; want UTC seconds", key)
	}
	if got, ok := ParseName(key); !ok || !got.Equal(at.Truncate(time.Second)) {
		t.Errorf("ParseName(%q) = %v, %v", key, got, ok)
	}
	if got, ok := ParseName("dump-2024-03-05-060809.json.gz"); !ok || !got.Equal(at.Truncate(time.Second)) {
		t.Errorf("ParseName of a base name = %v, %v", got, ok)
	}
	for _, bad := range []string{"meta/dump-2024-03-05.json.gz", "meta/dump-2024-13-05-060809.json.gz",
		"meta/other.json.gz", "meta/dump-2024-03-05-060809.json", "chunks/0/0/1_0_4"} {
		if _, ok := ParseName(bad); ok {
			t.Errorf("ParseName(%q) accepted it", bad)
		}
	}
}

// TestRotate runs the rotation on tables of backup times, as ages before
// now, and checks which it deletes.
func TestRotate(t *testing.T) {
	// now is a Wednesday; ISO week 2024-W11 runs Mon 11 to Sun 17 March.
	now := time.Date(2024, 3, 13, 12, 0, 0, 0, time.UTC)
	h, d := time.Hour, 24*time.Hour
	at := func(s string) string {
		tm, err := time.Parse("2006-01-02 15:04", s)
		if err != nil {
			t.Fatal(err)
		}
		return Name(tm)
	}
	ago := func(x time.Duration) string { return Name(now.Add(-x)) }
	for _, tc := range []struct {
		name       string
		keys, want []string // want: deleted
	}{
		{name: "none"},
		{name: "every backup of the last two days is kept",
			keys: []string{ago(0), ago(h), ago(2 * h), ago(23 * h), ago(25 * h), ago(47 * h), ago(2*d - time.Second)}},
		{name: "the oldest of each day from 2 days to 2 weeks",
			keys: []string{at("2024-03-10 01:00"), at("2024-03-10 05:00"), at("2024-03-10 23:00"), // day 10: keep 01:00
				at("2024-03-09 00:00"), at("2024-03-09 23:59"), // day 9: keep 00:00
				at("2024-03-01 13:00")}, // alone in its day
			want: []string{at("2024-03-10 05:00"), at("2024-03-10 23:00"), at("2024-03-09 23:59")}},
		{name: "a day split by the 2-day edge keeps its young part",
			keys: []string{at("2024-03-11 06:00"), at("2024-03-11 10:00"), at("2024-03-11 13:00"), at("2024-03-11 20:00")},
			want: []string{at("2024-03-11 10:00")}},
		{name: "the oldest of each ISO week from 2 weeks to 60 days",
			// W08 (19-25 Feb) and W07 (12-18 Feb); 27 Feb, 15 days
			// old, is alone in W09.
			keys: []string{at("2024-02-19 00:30"), at("2024-02-21 12:00"), at("2024-02-25 23:00"),
				at("2024-02-12 08:00"), at("2024-02-18 08:00"), at("2024-02-27 08:00")},
			want: []string{at("2024-02-21 12:00"), at("2024-02-25 23:00"), at("2024-02-18 08:00")}},
		{name: "the oldest of each month beyond 60 days, for ever",
			keys: []string{at("2023-12-01 00:00"), at("2023-12-15 00:00"), at("2023-12-31 23:59"),
				at("2023-11-30 00:00"), at("2021-06-06 06:06"), at("2021-06-07 06:06")},
			want: []string{at("2023-12-15 00:00"), at("2023-12-31 23:59"), at("2021-06-07 06:06")}},
		{name: "hourly for a long time",
			keys: hourly(now, 90*24),
			want: nil /* checked by count below */},
		{name: "other keys and future backups are left alone",
			keys: []string{"meta/notes.txt", "meta/dump-latest.json.gz", ago(-5 * d), ago(-5*d - h), at("2020-01-01 00:00"), at("2020-01-02 00:00")},
			want: []string{at("2020-01-02 00:00")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Rotate(tc.keys, now)
			if tc.name == "hourly for a long time" {
				kept := len(tc.keys) - len(got)
				// 48 of the last 2 days, 12 days, the weeks and months
				// after: about 48+12+7+2.
				if kept < 60 || kept > 75 {
					t.Errorf("kept %d of %d hourly backups over 90 days", kept, len(tc.keys))
				}
				if again := Rotate(without(tc.keys, got), now); len(again) != 0 {
					t.Errorf("a second rotation at the same time deletes %d more", len(again))
				}
				// An hour later, the kept ones thin but the newest stays.
				later := Rotate(without(tc.keys, got), now.Add(h))
				if slices.Contains(later, tc.keys[len(tc.keys)-1]) {
					t.Error("the newest backup was deleted")
				}
				return
			}
			if !slices.Equal(got, sorted(tc.want)) {
				t.Errorf("Rotate deleted\n\t%v\nwant\n\t%v", got, sorted(tc.want))
			}
			if again := Rotate(without(tc.keys, got), now); len(again) != 0 {
				t.Errorf("a second rotation at the same time deletes %v", again)
			}
		})
	}
}

// hourly returns n backups an hour apart, the last at now.
func hourly(now time.Time, n int) []string {
	var keys []string
	for i := n - 1; i >= 0; i-- {
		keys = append(keys, Name(now.Add(-time.Duration(i)*time.Hour)))
	}
	return keys
}

func without(keys, del []string) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(del, k) {
			out = append(out, k)
		}
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
