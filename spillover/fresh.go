package spillover

import "time"

// freshWindow is how long after a tenant's last fresh message (one not
// from the backlog queue) its backlog messages still yield to fresh ones.
const freshWindow = 5 * time.Second

// fresh keeps when each tenant's latest fresh message came to this
// worker, so that a tenant with nothing but old work left has its whole
// limits for it.
type fresh struct{ last *perTenant[struct{}] }

func newFresh(now time.Time) fresh {
	return fresh{newPerTenant[struct{}](freshWindow, now)}
}

// mark records a fresh message of tenant at now.
func (f fresh) mark(tenant string, now time.Time) {
	f.last.update(tenant, now, func(struct{}, bool) struct{} { return struct{}{} })
}

// recent reports whether a fresh message of tenant came within
// freshWindow of now.
func (f fresh) recent(tenant string, now time.Time) bool {
	_, at, ok := f.last.get(tenant)
	return ok && now.Sub(at) <= freshWindow
}
