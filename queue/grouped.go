package queue

import "context"

// Grouped is a Backend that sends every message in the group named by one
// of its attributes: each Entry without a GroupID gets the attribute's
// value as its GroupID. fairq names the tenant attribute (fairq-tenant),
// so that every send, whoever makes it (the gateway, each move of the
// worker, a redrive), puts a tenant's messages in the tenant's group, and
// SQS fair queues can tell the tenants of a queue apart.
//
// An entry without the attribute, or whose value is not a valid group id
// (ValidGroupID), is sent in no group: SQS counts each such message as a
// tenant of its own, never a noisy one.
type Grouped struct {
	Backend
	attr string
}

var _ Backend = (*Grouped)(nil)

// NewGrouped returns b sending each message in the group its attribute
// attr names.
func NewGrouped(b Backend, attr string) *Grouped {
	return &Grouped{Backend: b, attr: attr}
}

// Send sends entries as b does, each in its group. The caller's entries
// are not changed.
func (g *Grouped) Send(ctx context.Context, queue string, entries []Entry) ([]SendResult, error) {
	grouped := make([]Entry, len(entries))
	copy(grouped, entries)
	for i := range grouped {
		e := &grouped[i]
		if v := e.Attributes[g.attr]; e.GroupID == "" && ValidGroupID(v) {
			e.GroupID = v
		}
	}
	return g.Backend.Send(ctx, queue, grouped)
}
