package sharding

// PreferSlack is how much deeper than the shallowest queue of a shard a
// queue PickPreferring takes may be estimated: a batch of sends' worth of
// messages, which no tenant's isolation notices. A queue a noisy tenant
// fills is hundreds deeper and never preferred.
const PreferSlack = 10

// PickPreferring is Pick, except that when prefer does not accept the
// shallowest queue of the tenant's shard, it takes the first queue of the
// shard that prefer accepts among those estimated within PreferSlack of the
// shallowest, if there is one. prefer is called with indices in
// Config.Queues. The gateway prefers the queues where a batch of sends is
// waiting for company, so that messages of tenants whose shards overlap
// share calls. With stale readings it picks as Pick does.
func (t *Tracker) PickPreferring(tenant string, prefer func(q int) bool) int {
	if t.stale.Load() {
		return t.Pick(tenant)
	}
	s := t.pool.Shard(tenant)
	q := t.shallowest(s)
	if !prefer(q) {
		limit := t.depth(q) + PreferSlack
		for i := range s.Len() {
			if c := s.Queue(i); c != q && t.depth(c) <= limit && prefer(c) {
				q = c
				break
			}
		}
	}
	t.est[q].sent.Add(1)
	return q
}

// depth is queue index q's estimated depth as shallowest weighs it.
func (t *Tracker) depth(q int) int64 { return t.est[q].adj.Load() + t.est[q].sent.Load() }
