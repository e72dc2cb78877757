package imds

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"lifeboat.dev/lifeboat/internal/event"
)

// FuzzParse feeds every path arbitrary bodies, seeded with the real
// payloads: Parse must not panic, must be deterministic, and every event it
// returns must be well-formed with a unique ID.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 30s ./internal/source/imds
func FuzzParse(f *testing.F) {
	err := filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, "testdata/fuzz") || strings.HasSuffix(p, ".md") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i := range Paths {
			f.Add(uint8(i), b)
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		path := Paths[int(which)%len(Paths)]
		evs, err := Parse(path, testInstance, body)
		again, err2 := Parse(path, testInstance, body)
		if (err == nil) != (err2 == nil) || !cmp.Equal(evs, again) {
			t.Fatalf("Parse is not deterministic: %v/%v vs %v/%v", evs, err, again, err2)
		}
		if err != nil && len(evs) > 0 {
			t.Fatalf("Parse returned events and an error: %v, %v", evs, err)
		}
		var ids []string
		for _, e := range evs {
			if e.ID == "" || !strings.HasPrefix(e.ID, string(e.Kind)+"-") || e.InstanceID != testInstance || e.Source != event.SourceIMDS {
				t.Fatalf("malformed event %+v", e)
			}
			if !slices.Contains(event.Kinds, e.Kind) || e.Kind == event.LifecycleLaunch {
				t.Fatalf("unexpected kind %q", e.Kind)
			}
			if slices.Contains(ids, e.ID) {
				t.Fatalf("duplicate ID %s in %v", e.ID, evs)
			}
			ids = append(ids, e.ID)
		}
	})
}
