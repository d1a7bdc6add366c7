package tenant

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// record is what the admin API stores for a tenant; it wins over the
// configuration file.
type record struct {
	Limits  Limits      `json:"limits"`
	Keys    []keyRecord `json:"keys,omitempty"`
	Deleted bool        `json:"deleted,omitempty"`
	Updated int64       `json:"updated"` // unix ms
	// Paused holds the tenant's messages unstarted; PauseIngest also
	// refuses new ones at the front door.
	Paused      bool `json:"paused,omitempty"`
	PauseIngest bool `json:"pause_ingest,omitempty"`
	// PurgedBefore, unix ms, deletes unseen the tenant's messages enqueued
	// before it. A deleted tenant's record keeps it (a tombstone), so that
	// its queued messages are deleted too, and a tenant created again
	// under the same id does not get them back.
	PurgedBefore int64 `json:"purged_before,omitempty"`
}

type keyRecord struct {
	ID      string `json:"id"`
	Hash    string `json:"hash"`
	Created int64  `json:"created,omitempty"` // unix ms; 0 for keys from the file
}

// stored is a record and the revision it was read at. A record stored by
// a release before revisions shared its slot has none here yet: found,
// at revision 0.
type stored struct {
	rec   record
	rev   int64
	found bool
}

// store holds the records.
type store interface {
	// version returns a number that changes whenever a record does.
	version(ctx context.Context) (int64, error)
	// load returns every record and the version they are at.
	load(ctx context.Context) (int64, map[string]record, error)
	// get returns one record; not found, at rev 0, when there is none.
	get(ctx context.Context, id string) (stored, error)
	// put stores rec if the record is still at rev; false when it moved.
	put(ctx context.Context, id string, rev int64, rec record) (bool, error)
}

// memStore keeps the records in process.
type memStore struct {
	mu   sync.Mutex
	ver  int64
	recs map[string]stored
}

var _ store = (*memStore)(nil)

func newMemStore() *memStore { return &memStore{recs: make(map[string]stored)} }

func (m *memStore) version(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ver, nil
}

func (m *memStore) load(context.Context) (int64, map[string]record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]record, len(m.recs))
	for id, s := range m.recs {
		out[id] = s.rec
	}
	return m.ver, out, nil
}

func (m *memStore) get(_ context.Context, id string) (stored, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recs[id], nil
}

func (m *memStore) put(_ context.Context, id string, rev int64, rec record) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs[id].rev != rev {
		return false, nil
	}
	m.recs[id] = stored{rec: rec, rev: rev + 1, found: true}
	m.ver++
	return true, nil
}

func encodeRecord(r record) string {
	b, _ := json.Marshal(r) // cannot fail: strings, numbers, bools
	return string(b)
}

// state is the record's State.
func (r record) state() State {
	st := State{Paused: r.Paused, PauseIngest: r.Paused && r.PauseIngest}
	if r.PurgedBefore != 0 {
		st.PurgedBefore = time.UnixMilli(r.PurgedBefore).UTC()
	}
	return st
}
